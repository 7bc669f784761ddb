//! The store conformance suite, written once against the `Store` trait.
//!
//! A backend's test file opens boards through a [`Board`] and expands
//! [`store_conformance_tests!`] to get every scenario as a named test, including the
//! races of real threads on separate connections and the random-operation property test
//! that checks the invariants after every step.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

mod cost_safety;
mod fanout_cap;
mod random_ops;

pub use cost_safety::{
    breaker_opens_and_closes_durably, racing_faults_open_the_breaker_once, spend_sums_the_window,
};
pub use fanout_cap::fanout_cap_is_one_rule;
pub use random_ops::random_operations;

use crate::plan::{Mode, Plan, PlanBasis, PlanSettings, PlannedTask};
use crate::store::{Claim, Completion, ReclaimOutcome, RunEnd, Store, StoreError, Termination, Terminator};
use crate::types::{BlockKind, Outcome, Status, Task, TaskId};
use crate::{check_invariants, check_step, NewTask, NoWorkers, Refusal, Request};

/// A board under test: every `connect` is a separate connection to the same board.
pub trait Board: Send + Sync {
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

/// claim, block(capability), unblock, claim, block(capability): back to triage, two runs.
pub fn block_loop_sends_task_to_triage(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "flaky capability");
    let c1 = s.claim(&t.id, 900, T0).unwrap();
    assert!(s
        .block(
            &t.id,
            Some(BlockKind::Capability),
            Some("no gpu".into()),
            Some(c1.run_id),
            T0
        )
        .unwrap());
    assert_eq!(s.get(&t.id).unwrap().status, Status::Blocked);
    s.unblock(&t.id, None, T0 + 1).unwrap();
    let c2 = s.claim(&t.id, 900, T0 + 2).unwrap();
    assert!(s
        .block(&t.id, Some(BlockKind::Capability), None, Some(c2.run_id), T0 + 3)
        .unwrap());
    let task = s.get(&t.id).unwrap();
    assert_eq!(task.status, Status::Triage);
    assert_eq!(task.block_recurrences, 2);
    assert_eq!(s.runs(&t.id).unwrap().len(), 2);
    assert!(event_kinds(&*s, &t.id).contains(&"block_loop_detected".to_owned()));
    assert_board_ok(&*s);
}

/// A different kind resets the count; a completion resets it too.
pub fn block_recurrence_counts_same_kind_only(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "varied blocks");
    s.claim(&t.id, 900, T0).unwrap();
    assert!(s
        .block(&t.id, Some(BlockKind::Capability), None, None, T0)
        .unwrap());
    s.unblock(&t.id, None, T0).unwrap();
    s.claim(&t.id, 900, T0).unwrap();
    assert!(s
        .block(&t.id, Some(BlockKind::NeedsInput), None, None, T0)
        .unwrap());
    let task = s.get(&t.id).unwrap();
    assert_eq!((task.status, task.block_recurrences), (Status::Blocked, 1));
    assert!(s.complete(&t.id, &Completion::default(), T0).unwrap());
    assert_eq!(s.get(&t.id).unwrap().block_recurrences, 0);
}

/// A run-guarded block, then a replayed completion of that run: done.
pub fn replay_completes_after_block(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "journaled work");
    let c = s.claim(&t.id, 900, T0).unwrap();
    assert!(s
        .block(&t.id, None, Some("lost lease".into()), Some(c.run_id), T0 + 1)
        .unwrap());
    let replay = Completion {
        replay_ended_run_id: Some(c.run_id),
        result: Some("it worked".into()),
        ..Completion::default()
    };
    assert!(s.complete(&t.id, &replay, T0 + 2).unwrap());
    let task = s.get(&t.id).unwrap();
    assert_eq!(task.status, Status::Done);
    assert_eq!(task.result.as_deref(), Some("it worked"));
    let runs = s.runs(&t.id).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, Some(Outcome::Completed));
    assert_board_ok(&*s);
}

/// The replay after a replacement run was claimed and ended: refused, nothing changes.
pub fn replay_refused_after_replacement(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "replaced");
    let c1 = s.claim(&t.id, 900, T0).unwrap();
    assert!(s.block(&t.id, None, None, Some(c1.run_id), T0).unwrap());
    s.unblock(&t.id, None, T0).unwrap();
    let c2 = s.claim(&t.id, 900, T0).unwrap();
    assert_eq!(
        s.reclaim(&t.id, Some(c2.run_id), None, &NoWorkers, T0).unwrap(),
        ReclaimOutcome::Reclaimed
    );
    let before = s.snapshot().unwrap();
    let replay = Completion {
        replay_ended_run_id: Some(c1.run_id),
        ..Completion::default()
    };
    assert!(!s.complete(&t.id, &replay, T0 + 5).unwrap());
    assert_eq!(s.snapshot().unwrap(), before, "a refused replay changes nothing");
    assert_eq!(s.get(&t.id).unwrap().status, Status::Ready);
}

/// reclaim(expected = current): ready, no current run, the run closed as reclaimed.
pub fn reclaim_current_run(board: &dyn Board) {
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
pub fn reclaim_of_older_run_is_refused(board: &dyn Board) {
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
pub fn reclaim_loses_to_replacement_installed_meanwhile(board: &dyn Board) {
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
pub fn completion_in_terminate_window_wins(board: &dyn Board) {
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
pub fn reclaim_defers_while_worker_survives(board: &dyn Board) {
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
pub fn stale_guards_change_nothing(board: &dyn Board) {
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

/// A reclaim takes every lease field the worker set (pid, heartbeat, expiry) off the
/// task and leaves them on the closed run; the next claim opens a fresh lease.
pub fn reclaim_clears_the_lease(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "leases");
    let c1 = s.claim(&t.id, 900, T0).unwrap();
    let spawned = Request::SetWorker {
        run_id: c1.run_id,
        claim_lock: c1.claim_lock.clone(),
        pid: 4242,
    };
    s.transition(&t.id, &spawned, T0 + 1).unwrap();
    assert!(s.heartbeat(&t.id, c1.run_id, 900, None, T0 + 10).unwrap());
    let lease = |t: &Task| {
        let l = t.lease.clone().expect("a running task holds a lease");
        (l.worker_pid, l.last_heartbeat_at, l.expires)
    };
    assert_eq!(
        lease(&s.get(&t.id).unwrap()),
        (Some(4242), Some(T0 + 10), T0 + 910)
    );
    s.reclaim(&t.id, None, None, &NoWorkers, T0 + 20).unwrap();
    assert_eq!(s.get(&t.id).unwrap().lease, None);
    let closed = &s.runs(&t.id).unwrap()[0];
    assert_eq!(
        (closed.worker_pid, closed.last_heartbeat_at, closed.claim_expires),
        (Some(4242), Some(T0 + 10), None)
    );
    let c2 = s.claim(&t.id, 50, T0 + 30).unwrap();
    assert_ne!(c1.claim_lock, c2.claim_lock);
    assert!(c2.run_id > c1.run_id);
    let task = s.get(&t.id).unwrap();
    assert_eq!(lease(&task), (None, None, T0 + 80));
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

/// Children wait for their parents, and are promoted when the last parent completes.
pub fn dependencies_hold_and_release(board: &dyn Board) {
    let s = board.connect();
    let a = ready_task(&*s, "parent a");
    let b = ready_task(&*s, "parent b");
    let child = s
        .create(
            &NewTask {
                parents: vec![a.id.clone(), b.id.clone()],
                ..NewTask::titled("child")
            },
            T0,
        )
        .unwrap();
    assert_eq!(child.status, Status::Todo);
    assert!(s.claim(&child.id, 900, T0).is_err());
    s.complete(&a.id, &Completion::default(), T0).unwrap();
    assert_eq!(s.get(&child.id).unwrap().status, Status::Todo);
    s.archive(&b.id, T0).unwrap();
    assert_eq!(s.get(&child.id).unwrap().status, Status::Ready);
    let unknown = TaskId::from_random([0xde, 0xad, 0xbe, 0xef]);
    let err = s
        .create(
            &NewTask {
                parents: vec![unknown.clone()],
                ..NewTask::titled("orphan")
            },
            T0,
        )
        .unwrap_err();
    assert_eq!(err, StoreError::Refused(Refusal::NoSuchTask(unknown)));
    assert_board_ok(&*s);
}

/// Links refuse self-links, cycles and running children; an open parent sends a ready
/// child back to todo; unlinking the last open parent promotes it.
pub fn links_refuse_cycles(board: &dyn Board) {
    let s = board.connect();
    let a = ready_task(&*s, "a");
    let b = ready_task(&*s, "b");
    let c = ready_task(&*s, "c");
    s.link(&a.id, &b.id, T0).unwrap();
    assert_eq!(s.get(&b.id).unwrap().status, Status::Todo);
    s.link(&b.id, &c.id, T0).unwrap();
    let before = s.snapshot().unwrap();
    assert!(matches!(
        s.link(&c.id, &a.id, T0),
        Err(StoreError::Refused(Refusal::Cycle { .. }))
    ));
    assert!(matches!(
        s.link(&a.id, &a.id, T0),
        Err(StoreError::Refused(Refusal::SelfLink(_)))
    ));
    assert_eq!(s.snapshot().unwrap(), before);
    let d = ready_task(&*s, "d");
    s.claim(&d.id, 900, T0).unwrap();
    assert!(matches!(
        s.link(&a.id, &d.id, T0),
        Err(StoreError::Refused(Refusal::Running { .. }))
    ));
    s.unlink(&a.id, &b.id, T0).unwrap();
    assert_eq!(s.get(&b.id).unwrap().status, Status::Ready);
    assert!(matches!(
        s.unlink(&a.id, &b.id, T0),
        Err(StoreError::Refused(Refusal::NoSuchLink { .. }))
    ));
    assert_board_ok(&*s);
}

/// How a supervisor ends the run of claim `c`, giving up at two failures in a row.
fn ended(c: &Claim, outcome: Outcome, error: Option<String>, detail: serde_json::Value) -> RunEnd {
    RunEnd {
        run_id: c.run_id,
        claim_lock: c.claim_lock.clone(),
        outcome,
        error,
        detail,
        failure_limit: 2,
    }
}

/// The dispatcher's finalisers count failures and give up at the limit; a rate-limited
/// exit counts nothing.
pub fn failures_count_to_give_up(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "crashy");
    for _ in 0..2 {
        let c = s.claim(&t.id, 900, T0).unwrap();
        let limited = s
            .end_run(
                &t.id,
                ended(&c, Outcome::RateLimited, None, serde_json::json!({})),
                T0,
            )
            .unwrap();
        assert!(limited);
    }
    assert_eq!(s.get(&t.id).unwrap().consecutive_failures, 0);
    let c = s.claim(&t.id, 900, T0).unwrap();
    let detail = serde_json::json!({ "exit_code": 3, "signal": null });
    assert!(s
        .end_run(
            &t.id,
            ended(&c, Outcome::Crashed, Some("boom".into()), detail.clone()),
            T0
        )
        .unwrap());
    assert_eq!(s.get(&t.id).unwrap().status, Status::Ready);
    assert!(
        !s.end_run(&t.id, ended(&c, Outcome::Crashed, None, detail.clone()), T0)
            .unwrap(),
        "a second finaliser of the same run loses"
    );
    let c = s.claim(&t.id, 900, T0).unwrap();
    assert!(s
        .end_run(
            &t.id,
            ended(&c, Outcome::Crashed, Some("boom".into()), detail),
            T0
        )
        .unwrap());
    let task = s.get(&t.id).unwrap();
    assert_eq!(task.status, Status::Blocked);
    assert_eq!(task.consecutive_failures, 2);
    assert!(event_kinds(&*s, &t.id).contains(&"gave_up".to_owned()));
    assert_board_ok(&*s);
}

/// Idempotency keys return the first task instead of a second one.
pub fn idempotent_create(board: &dyn Board) {
    let s = board.connect();
    let request = NewTask {
        idempotency_key: Some("job-42".into()),
        ..NewTask::titled("once")
    };
    let a = s.create(&request, T0).unwrap();
    let b = s.create(&request, T0 + 1).unwrap();
    assert_eq!(a, b);
    assert_eq!(s.snapshot().unwrap().tasks.len(), 1);
}

/// Edits bump the revision and clear a decomposition park; done tasks refuse edits.
pub fn edit_assign_and_archive(board: &dyn Board) {
    let s = board.connect();
    let t = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("rough")
            },
            T0,
        )
        .unwrap();
    let policy = crate::RetryPolicy {
        base_seconds: 30,
        failure_limit: 1,
    };
    let parked = s
        .record_decompose_failure(&t.id, "malformed reply", policy, 0.0, T0)
        .unwrap();
    assert!(parked.decompose_parked);
    let edited = s
        .edit(&t.id, Some("sharper".into()), None, Some(5), T0 + 1)
        .unwrap();
    assert_eq!((edited.revision, edited.priority), (1, 5));
    assert!(!edited.decompose_parked);
    assert_eq!(edited.decompose_failures, 0);
    let assigned = s.assign(&t.id, Some("coder".into()), T0).unwrap();
    assert_eq!(assigned.revision, 2);
    let r = ready_task(&*s, "running");
    s.claim(&r.id, 900, T0).unwrap();
    assert!(matches!(
        s.assign(&r.id, None, T0),
        Err(StoreError::Refused(Refusal::Running { .. }))
    ));
    let archived = s.archive(&r.id, T0).unwrap();
    assert_eq!(archived.status, Status::Archived);
    assert_eq!(s.runs(&r.id).unwrap()[0].outcome, Some(Outcome::Reclaimed));
    assert!(s.edit(&r.id, Some("x".into()), None, None, T0).is_err());
    assert!(s.archive(&r.id, T0).is_err());
    assert_board_ok(&*s);
}

/// The automatic decomposition guards and the commit of both plan shapes.
pub fn decomposition_commits_and_guards(board: &dyn Board) {
    let s = board.connect();
    let settings = PlanSettings {
        orchestrator: "lead".into(),
        ..PlanSettings::default()
    };
    let card = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("build a thing")
            },
            T0,
        )
        .unwrap();
    let due = s.due_triage(T0, 10).unwrap();
    assert_eq!(due.iter().map(|t| &t.id).collect::<Vec<_>>(), vec![&card.id]);
    let basis = PlanBasis::of(&s.facts(&card.id).unwrap());
    let planned = |title: &str, parents: Vec<usize>| PlannedTask {
        title: title.into(),
        body: String::new(),
        assignee: "default".into(),
        parents,
    };
    let plan = Plan::Fanout {
        rationale: None,
        tasks: vec![
            planned("one", vec![]),
            planned("two", vec![]),
            planned("three", vec![0]),
        ],
    };
    let committed = s
        .commit_plan(&card.id, basis, Mode::Automatic, &plan, &settings, T0 + 1)
        .unwrap();
    assert_eq!(committed.child_ids.len(), 3);
    let root = s.get(&card.id).unwrap();
    assert_eq!(root.status, Status::Todo);
    assert_eq!(root.assignee.as_deref(), Some("lead"));
    let kids: Vec<Status> = committed
        .child_ids
        .iter()
        .map(|id| s.get(id).unwrap().status)
        .collect();
    assert_eq!(kids, vec![Status::Ready, Status::Ready, Status::Todo]);
    let parents_of_third: Vec<TaskId> = s
        .parents(&committed.child_ids[2])
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(parents_of_third, vec![committed.child_ids[0].clone()]);
    let root_parents: BTreeSet<TaskId> = s.parents(&card.id).unwrap().into_iter().map(|t| t.id).collect();
    assert_eq!(root_parents, committed.child_ids.iter().cloned().collect());
    let decomposed: Vec<_> = s
        .events(&crate::EventFilter {
            task_id: Some(card.id.clone()),
            ..Default::default()
        })
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "decomposed")
        .collect();
    assert_eq!(decomposed.len(), 1);
    assert_eq!(
        decomposed[0].payload["child_ids"],
        serde_json::json!(committed.child_ids)
    );
    // Never twice.
    assert!(s
        .commit_plan(&card.id, basis, Mode::Manual, &plan, &settings, T0 + 2)
        .is_err());

    // A card that gained a run while the model answered is not decomposed.
    let busy = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("busy")
            },
            T0,
        )
        .unwrap();
    let basis = PlanBasis::of(&s.facts(&busy.id).unwrap());
    s.edit(&busy.id, Some("busy, edited".into()), None, None, T0)
        .unwrap();
    let single = Plan::Single {
        title: "tight".into(),
        body: "b".into(),
        assignee: None,
    };
    let before = s.snapshot().unwrap();
    assert_eq!(
        s.commit_plan(&busy.id, basis, Mode::Automatic, &single, &settings, T0)
            .unwrap_err(),
        StoreError::Refused(Refusal::InputChanged(busy.id.clone()))
    );
    assert_eq!(s.snapshot().unwrap(), before);
    let basis = PlanBasis::of(&s.facts(&busy.id).unwrap());
    let spec = s
        .commit_plan(&busy.id, basis, Mode::Automatic, &single, &settings, T0)
        .unwrap();
    assert_eq!(
        (spec.root.status, spec.root.title.as_str()),
        (Status::Ready, "tight")
    );

    // Over the cap: rejected whole, nothing written.
    let wide = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("wide")
            },
            T0,
        )
        .unwrap();
    let basis = PlanBasis::of(&s.facts(&wide.id).unwrap());
    let huge = Plan::Fanout {
        rationale: None,
        tasks: (0..500).map(|i| planned(&format!("t{i}"), vec![])).collect(),
    };
    let before = s.snapshot().unwrap();
    let err = s
        .commit_plan(&wide.id, basis, Mode::Manual, &huge, &settings, T0)
        .unwrap_err();
    assert!(
        err.to_string().contains("reply has 500 tasks, limit is 16"),
        "{err}"
    );
    assert_eq!(s.snapshot().unwrap(), before);

    // Failures back off, then park; a parked or cooling card is not due.
    let policy = crate::RetryPolicy::default();
    let t = s
        .record_decompose_failure(&wide.id, "HTTP 500", policy, 0.0, T0)
        .unwrap();
    assert_eq!(t.decompose_next_attempt_at, Some(T0 + 30));
    assert!(s.due_triage(T0 + 29, 10).unwrap().iter().all(|d| d.id != wide.id));
    assert!(s.due_triage(T0 + 30, 10).unwrap().iter().any(|d| d.id == wide.id));
    s.record_decompose_failure(&wide.id, "HTTP 500", policy, 0.0, T0 + 30)
        .unwrap();
    let t = s
        .record_decompose_failure(&wide.id, "HTTP 500", policy, 0.0, T0 + 90)
        .unwrap();
    assert!(t.decompose_parked);
    assert!(s
        .due_triage(T0 + 100_000, 10)
        .unwrap()
        .iter()
        .all(|d| d.id != wide.id));
    s.clear_decompose_failures(&wide.id, T0).unwrap();
    assert!(s.due_triage(T0, 10).unwrap().iter().any(|d| d.id == wide.id));
    assert_board_ok(&*s);
}

/// A card with execution history is never due and never committed automatically.
pub fn history_blocks_automatic_decomposition(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "ran before");
    for _ in 0..2 {
        s.claim(&t.id, 900, T0).unwrap();
        s.block(&t.id, Some(BlockKind::Capability), None, None, T0)
            .unwrap();
        if s.get(&t.id).unwrap().status == Status::Blocked {
            s.unblock(&t.id, None, T0).unwrap();
        }
    }
    assert_eq!(s.get(&t.id).unwrap().status, Status::Triage);
    assert!(s.due_triage(T0, 10).unwrap().is_empty());
    let facts = s.facts(&t.id).unwrap();
    let err = crate::plan::automatic_guard(&facts, T0).unwrap_err();
    assert!(err.to_string().contains("execution history"), "{err}");
    let single = Plan::Single {
        title: "again".into(),
        body: String::new(),
        assignee: None,
    };
    let basis = PlanBasis::of(&facts);
    let err = s
        .commit_plan(
            &t.id,
            basis,
            Mode::Automatic,
            &single,
            &PlanSettings::default(),
            T0,
        )
        .unwrap_err();
    assert!(err.to_string().contains("gained execution history"), "{err}");
    let ok = s
        .commit_plan(&t.id, basis, Mode::Manual, &single, &PlanSettings::default(), T0)
        .unwrap();
    assert_eq!(ok.root.status, Status::Ready);
}

/// Comments, runs and events read back in order; unknown ids are refused.
pub fn reads_and_unknown_ids(board: &dyn Board) {
    let s = board.connect();
    let t = ready_task(&*s, "talked about");
    s.comment(&t.id, Some("ana"), "looks good", T0).unwrap();
    s.comment(&t.id, None, "second", T0 + 1).unwrap();
    let comments = s.comments(&t.id).unwrap();
    assert_eq!(
        comments.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(),
        ["looks good", "second"]
    );
    let unknown = TaskId::from_random([1, 2, 3, 4]);
    let missing = StoreError::Refused(Refusal::NoSuchTask(unknown.clone()));
    assert_eq!(s.get(&unknown).unwrap_err(), missing);
    assert_eq!(s.claim(&unknown, 900, T0).unwrap_err(), missing);
    assert_eq!(s.runs(&unknown).unwrap_err(), missing);
    assert_eq!(s.comment(&unknown, None, "x", T0).unwrap_err(), missing);
    let all = s.events(&crate::EventFilter::default()).unwrap();
    assert!(all.windows(2).all(|w| w[0].id < w[1].id));
    let tail = s
        .events(&crate::EventFilter {
            after_id: all[1].id,
            limit: Some(1),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(tail, vec![all[2].clone()]);
}

/// Listings filter and order as documented; the dispatcher's queues return what is due.
pub fn listings_and_queues(board: &dyn Board) {
    let s = board.connect();
    let low = ready_task(&*s, "low");
    let high = s
        .create(
            &NewTask {
                priority: 5,
                assignee: Some("coder".into()),
                ..NewTask::titled("high")
            },
            T0 + 1,
        )
        .unwrap();
    let triage = s
        .create(
            &NewTask {
                triage: true,
                ..NewTask::titled("rough")
            },
            T0 + 2,
        )
        .unwrap();
    let gone = ready_task(&*s, "gone");
    s.archive(&gone.id, T0).unwrap();
    let ids = |tasks: Vec<Task>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.list(&crate::TaskFilter::default()).unwrap()),
        vec![high.id.clone(), low.id.clone(), triage.id.clone()]
    );
    let archived = crate::TaskFilter {
        include_archived: true,
        ..Default::default()
    };
    assert_eq!(s.list(&archived).unwrap().len(), 4);
    let by_status = crate::TaskFilter {
        status: Some(Status::Archived),
        ..Default::default()
    };
    assert_eq!(ids(s.list(&by_status).unwrap()), vec![gone.id.clone()]);
    let by_assignee = crate::TaskFilter {
        assignee: Some("coder".into()),
        ..Default::default()
    };
    assert_eq!(ids(s.list(&by_assignee).unwrap()), vec![high.id.clone()]);
    let limited = crate::TaskFilter {
        limit: Some(1),
        ..Default::default()
    };
    assert_eq!(ids(s.list(&limited).unwrap()), vec![high.id.clone()]);
    assert_eq!(
        ids(s.claimable(10).unwrap()),
        vec![high.id.clone(), low.id.clone()]
    );
    assert_eq!(ids(s.claimable(1).unwrap()), vec![high.id.clone()]);
    s.claim(&high.id, 100, T0).unwrap();
    s.claim(&low.id, 10, T0).unwrap();
    assert_eq!(ids(s.running().unwrap()), vec![high.id.clone(), low.id.clone()]);
    assert!(s.expired_leases(T0 + 9, 10).unwrap().is_empty());
    assert_eq!(ids(s.expired_leases(T0 + 10, 10).unwrap()), vec![low.id.clone()]);
    assert_eq!(
        ids(s.expired_leases(T0 + 100, 10).unwrap()),
        vec![low.id, high.id]
    );
    assert_eq!(ids(s.due_triage(T0, 10).unwrap()), vec![triage.id]);
}

/// Both racers spin at a start line until every party has arrived, so both leave it
/// together: a sleeping barrier wakes the early arrivals late, and the last one to
/// arrive would nearly always win.
struct StartLine {
    arrived: AtomicUsize,
    parties: usize,
}

impl StartLine {
    fn new(parties: usize) -> StartLine {
        StartLine {
            arrived: AtomicUsize::new(0),
            parties,
        }
    }

    fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut spins = 0u32;
        while self.arrived.load(Ordering::SeqCst) < self.parties {
            assert!(Instant::now() < deadline, "a racer never reached the start line");
            spins += 1;
            // Yield now and then, so a racer not yet scheduled on a busy machine gets a core.
            if spins % 256 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// How the rounds of the reclaim/complete race ended.
#[derive(Debug, Default)]
struct RaceTally {
    /// The reclaim released the claim; the completion lost.
    reclaimed: usize,
    /// The completion landed before the reclaim read the task; nobody was signalled.
    completed_before_read: usize,
    /// The completion landed while the reclaim was terminating; the reclaim lost.
    completed_in_window: usize,
}

/// A reclaim and a completion of the same run race from two threads on two connections,
/// `rounds` times: exactly one wins each time, the board stays consistent, and each side
/// wins often enough to show that the two really overlap.
pub fn reclaim_and_complete_race(board: &dyn Board, rounds: usize) {
    let s = board.connect();
    let mut stagger = Stagger::default();
    let mut tally = RaceTally::default();
    for round in 0..rounds {
        let reclaimed = race_round(board, &*s, round, stagger.waits(), &mut tally);
        stagger.record(reclaimed);
    }
    eprintln!("reclaim/complete race, {rounds} rounds: {tally:?}");
    let completed = tally.completed_before_read + tally.completed_in_window;
    let floor = rounds / 10;
    assert!(
        tally.reclaimed >= floor && completed >= floor,
        "each side must win at least {floor} of {rounds} rounds: {tally:?}"
    );
    assert_board_ok(&*s);
}

/// How long each racer waits after the start line. From a common start one side wins
/// nearly always (which one depends on the store: a completion is one transaction, a
/// reclaim a read, a termination and a transaction), so after each round the winner waits
/// longer next time, by a step that doubles while the same side keeps winning and halves
/// when the winner changes. The rounds settle where the two operations overlap, whatever
/// the store's speed or the machine's load.
#[derive(Default)]
struct Stagger {
    /// Positive: the completer waits this long; negative: the reclaimer does.
    offset_ns: i64,
    step_ns: i64,
    last_reclaimed: Option<bool>,
}

impl Stagger {
    const MIN_STEP_NS: i64 = 200;
    const MAX_OFFSET_NS: i64 = 20_000_000;

    /// (the reclaimer's wait, the completer's wait)
    fn waits(&self) -> (Duration, Duration) {
        let wait = Duration::from_nanos(self.offset_ns.unsigned_abs());
        if self.offset_ns < 0 {
            (wait, Duration::ZERO)
        } else {
            (Duration::ZERO, wait)
        }
    }

    fn record(&mut self, reclaimed: bool) {
        self.step_ns = match self.last_reclaimed {
            Some(last) if last == reclaimed => self.step_ns * 2,
            _ => self.step_ns / 2,
        }
        .clamp(Self::MIN_STEP_NS, Self::MAX_OFFSET_NS);
        self.last_reclaimed = Some(reclaimed);
        let toward = if reclaimed { -self.step_ns } else { self.step_ns };
        self.offset_ns = (self.offset_ns + toward).clamp(-Self::MAX_OFFSET_NS, Self::MAX_OFFSET_NS);
    }
}

/// Spins until `d` has passed: a sleep is far coarser than a reclaim on a fast store.
fn spin_for(d: Duration) {
    let started = Instant::now();
    while started.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One round of the race; returns whether the reclaim won.
fn race_round(
    board: &dyn Board,
    s: &dyn Store,
    round: usize,
    (reclaimer_waits, completer_waits): (Duration, Duration),
    tally: &mut RaceTally,
) -> bool {
    let t = ready_task(s, &format!("race {round}"));
    let run_id = s.claim(&t.id, 900, T0).unwrap().run_id;
    let (reclaimer, worker) = (board.connect(), board.connect());
    let start = StartLine::new(2);
    let terminator = counting(|| {});
    let guarded = Completion {
        expected_run_id: Some(run_id),
        ..Completion::default()
    };
    let (reclaim, completed) = std::thread::scope(|scope| {
        let reclaim = scope.spawn(|| {
            start.wait();
            spin_for(reclaimer_waits);
            reclaimer
                .reclaim(&t.id, Some(run_id), None, &terminator, T0 + 1)
                .unwrap()
        });
        let complete = scope.spawn(|| {
            start.wait();
            spin_for(completer_waits);
            worker.complete(&t.id, &guarded, T0 + 1).unwrap()
        });
        (reclaim.join().unwrap(), complete.join().unwrap())
    });
    let reclaimed = reclaim == ReclaimOutcome::Reclaimed;
    assert!(
        reclaimed ^ completed,
        "round {round}: reclaim {reclaim:?}, completed={completed}"
    );
    let signalled = terminator.calls.load(Ordering::SeqCst);
    match (reclaimed, signalled) {
        (true, 1) => tally.reclaimed += 1,
        (false, 0) => tally.completed_before_read += 1,
        (false, 1) => tally.completed_in_window += 1,
        _ => panic!("round {round}: reclaim {reclaim:?} signalled the worker {signalled} times"),
    }
    let task = s.get(&t.id).unwrap();
    let expected = if completed { Status::Done } else { Status::Ready };
    assert_eq!(task.status, expected);
    assert_eq!(task.lease, None);
    let runs = s.runs(&t.id).unwrap();
    assert_eq!(runs.len(), 1);
    let outcome = if completed {
        Outcome::Completed
    } else {
        Outcome::Reclaimed
    };
    assert_eq!(runs[0].outcome, Some(outcome));
    reclaimed
}

/// `threads` connections claim the same `tasks` ready tasks: each is claimed exactly once,
/// no error surfaces, no run is orphaned.
pub fn concurrent_claims(board: &dyn Board, threads: usize, tasks: usize) {
    let s = board.connect();
    let ids: Vec<TaskId> = (0..tasks)
        .map(|i| ready_task(&*s, &format!("job {i}")).id)
        .collect();
    let ids = Arc::new(ids);
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (store, ids, barrier) = (board.connect(), ids.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut won = Vec::new();
                for id in ids.iter() {
                    match store.claim(id, 900, T0) {
                        Ok(c) => won.push(c.run_id),
                        Err(StoreError::Refused(Refusal::WrongStatus { .. })) => {}
                        Err(e) => panic!("claim of {id} surfaced an error: {e}"),
                    }
                }
                won
            })
        })
        .collect();
    let mut runs: Vec<i64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert_eq!(runs.len(), tasks, "every task claimed exactly once");
    runs.sort_unstable();
    runs.dedup();
    assert_eq!(runs.len(), tasks);
    let snapshot = s.snapshot().unwrap();
    assert_eq!(snapshot.runs.len(), tasks, "no orphan run");
    assert!(snapshot.tasks.iter().all(|t| t.status == Status::Running));
    assert_board_ok(&*s);
}

/// Expands to one `#[test]` per conformance scenario, plus the property test with
/// `$cases` random sequences. `$board` is an expression that makes a fresh [`Board`];
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
            reclaim_clears_the_lease,
            dependencies_hold_and_release,
            links_refuse_cycles,
            failures_count_to_give_up,
            idempotent_create,
            edit_assign_and_archive,
            decomposition_commits_and_guards,
            fanout_cap_is_one_rule,
            history_blocks_automatic_decomposition,
            reads_and_unknown_ids,
            listings_and_queues,
            breaker_opens_and_closes_durably,
            racing_faults_open_the_breaker_once,
            spend_sums_the_window,
        );

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
