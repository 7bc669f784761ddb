//! Scenarios of one task's runs: blocks and their recurrence, replayed completions,
//! failures counted to give-up.

use super::{assert_board_ok, event_kinds, ready_task, Backend, T0};
use crate::store::{Claim, Completion, ReclaimOutcome, RunEnd};
use crate::types::{BlockKind, Outcome, Status};
use crate::NoWorkers;

/// claim, block(capability), unblock, claim, block(capability): back to triage, two runs.
pub fn block_loop_sends_task_to_triage(board: &dyn Backend) {
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
pub fn block_recurrence_counts_same_kind_only(board: &dyn Backend) {
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
pub fn replay_completes_after_block(board: &dyn Backend) {
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
pub fn replay_refused_after_replacement(board: &dyn Backend) {
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
pub fn failures_count_to_give_up(board: &dyn Backend) {
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

/// `transition_each` applies each request as `transition` would, in order, each seeing
/// the ones before it: the workers of a tick recorded on their runs, one run that
/// changed meanwhile refused alone, a second archive of one task refused since the
/// first took, and a reopen that a running child refuses after its parent's row was
/// written left undone whole.
pub fn transition_each_applies_each_in_order(board: &dyn Backend) {
    use crate::transition::Request;
    let s = board.connect();
    let claims: Vec<Claim> = (0..2)
        .map(|i| {
            let t = ready_task(&*s, &format!("worked {i}"));
            s.claim(&t.id, 900, T0).unwrap()
        })
        .collect();
    let kept = ready_task(&*s, "archived once");
    let parent = ready_task(&*s, "done parent");
    let child = crate::NewTask {
        parents: vec![parent.id.clone()],
        ..crate::NewTask::titled("running child")
    };
    let child = s.create(&child, T0).unwrap();
    s.claim(&parent.id, 900, T0).unwrap();
    s.complete(&parent.id, &Completion::default(), T0).unwrap();
    s.claim(&child.id, 900, T0).unwrap();
    let worker = |c: &Claim, lock: &str, pid: i64| {
        let request = Request::SetWorker {
            run_id: c.run_id,
            claim_lock: lock.to_owned(),
            pid,
            host: "host-a".to_owned(),
        };
        (c.task.id.clone(), request)
    };
    let requests = vec![
        worker(&claims[0], &claims[0].claim_lock, 4100),
        worker(&claims[1], "another run's lock", 4101),
        (kept.id.clone(), Request::Archive),
        (
            parent.id.clone(),
            Request::Reopen(crate::transition::ByHand::default()),
        ),
        (kept.id.clone(), Request::Archive),
    ];
    let outcomes = s.transition_each(&requests, T0 + 1).unwrap();
    let refused: Vec<bool> = outcomes.iter().map(Result::is_err).collect();
    assert_eq!(refused, [false, true, false, true, true]);
    assert_eq!(s.runs(&claims[0].task.id).unwrap()[0].worker_pid, Some(4100));
    assert_eq!(s.runs(&claims[1].task.id).unwrap()[0].worker_pid, None);
    assert_eq!(s.get(&kept.id).unwrap().status, Status::Archived);
    assert_eq!(s.get(&parent.id).unwrap().status, Status::Done);
    assert_board_ok(&*s);
}
