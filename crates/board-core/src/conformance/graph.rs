//! Scenarios of the task graph and task fields: dependencies, cycles, idempotent create,
//! edit, assign and archive, promote and reopen by hand.

use super::{assert_board_ok, ready_task, Backend, T0};
use serde_json::json;

use crate::store::{Completion, StoreError};
use crate::transition::Backfill;
use crate::types::{Outcome, Status, TaskId};
use crate::{ByHand, EventFilter, NewTask, Refusal, Request};

/// Children wait for their parents, and are promoted when the last parent completes.
pub fn dependencies_hold_and_release(board: &dyn Backend) {
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
pub fn links_refuse_cycles(board: &dyn Backend) {
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

/// Idempotency keys return the first task instead of a second one.
pub fn idempotent_create(board: &dyn Backend) {
    let s = board.connect();
    let request = NewTask {
        idempotency_key: Some("job-42".into()),
        ..NewTask::titled("once")
    };
    let a = s.create_or_find(&request, T0).unwrap();
    let b = s.create_or_find(&request, T0 + 1).unwrap();
    assert!(matches!(a, crate::Creation::Created(_)), "{a:?}");
    assert_eq!(b, crate::Creation::Exists(a.into_task()));
    assert_eq!(s.snapshot().unwrap().tasks.len(), 1);
}

/// Edits bump the revision and clear a decomposition park; done tasks refuse edits.
pub fn edit_assign_and_archive(board: &dyn Backend) {
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
    let kept = s.get(&t.id).unwrap();
    assert_eq!(
        (kept.revision, kept.priority, kept.title.as_str()),
        (1, 5, "sharper")
    );
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

/// A person promotes a todo or blocked task whose parents are done (refused while one is open), and
/// reopens a done or archived one; each change says who and why in its event.
pub fn promote_and_reopen_by_hand(board: &dyn Backend) {
    let s = board.connect();
    let parent = ready_task(&*s, "parent");
    let child = child_of(&*s, &parent.id);
    let hand = ByHand {
        by: Some("alice".into()),
        reason: Some("the parent is good enough".into()),
    };
    let promote = Request::PromoteByHand(hand.clone());
    let refused = s.transition(&child.id, &promote, T0).unwrap_err();
    assert_eq!(
        refused,
        StoreError::Refused(Refusal::OpenParents {
            id: child.id.clone(),
            open: 1
        })
    );
    assert_eq!(s.get(&child.id).unwrap().status, Status::Todo);
    s.block(&parent.id, None, Some("waits".into()), None, T0).unwrap();
    let blocked_child = s.create(&NewTask::titled("blocked by hand"), T0).unwrap();
    s.block(&blocked_child.id, None, None, None, T0).unwrap();
    let promoted = s.transition(&blocked_child.id, &promote, T0 + 1).unwrap();
    assert_eq!(promoted.status, Status::Ready);
    let event = s.events(&of(&blocked_child.id)).unwrap().pop().unwrap();
    assert_eq!(event.kind, "promoted");
    assert_eq!(
        (
            &event.payload["from"],
            &event.payload["by"],
            &event.payload["reason"]
        ),
        (
            &json!("blocked"),
            &json!("alice"),
            &json!("the parent is good enough")
        )
    );
    let wrong = s.transition(&blocked_child.id, &promote, T0 + 2).unwrap_err();
    assert!(matches!(wrong, StoreError::Refused(Refusal::WrongStatus { .. })));
    assert_eq!(
        s.transition(&parent.id, &promote, T0 + 3).unwrap().status,
        Status::Ready
    );

    let reopen = Request::Reopen(hand.clone());
    s.claim(&parent.id, 900, T0).unwrap();
    assert!(matches!(
        s.transition(&parent.id, &reopen, T0 + 4),
        Err(StoreError::Refused(Refusal::WrongStatus { .. }))
    ));
    s.complete(&parent.id, &Completion::default(), T0 + 5).unwrap();
    assert_eq!(s.get(&child.id).unwrap().status, Status::Ready);
    s.claim(&child.id, 900, T0 + 5).unwrap();
    assert_eq!(
        s.transition(&parent.id, &reopen, T0 + 6).unwrap_err(),
        StoreError::Refused(Refusal::ChildStarted {
            parent: parent.id.clone(),
            child: child.id.clone()
        }),
        "a running child refuses its parent's reopen"
    );
    assert_eq!(s.get(&parent.id).unwrap().status, Status::Done);
    s.block(&child.id, None, None, None, T0 + 6).unwrap();
    s.unblock(&child.id, None, T0 + 6).unwrap();
    let reopened = s.transition(&parent.id, &reopen, T0 + 7).unwrap();
    assert_eq!((reopened.status, reopened.completed_at), (Status::Ready, None));
    let event = s.events(&of(&parent.id)).unwrap().pop().unwrap();
    assert_eq!(event.kind, "reopened");
    assert_eq!(
        (&event.payload["from"], &event.payload["to"]),
        (&json!("done"), &json!("ready"))
    );
    assert_eq!(
        s.get(&child.id).unwrap().status,
        Status::Todo,
        "it waits for its parent again"
    );
    s.archive(&child.id, T0 + 8).unwrap();
    let back = s.transition(&child.id, &reopen, T0 + 9).unwrap();
    assert_eq!(back.status, Status::Todo, "its parent is open");
    s.archive(&parent.id, T0 + 10).unwrap();
    assert_eq!(s.get(&child.id).unwrap().status, Status::Ready);
    assert_eq!(
        s.transition(&parent.id, &reopen, T0 + 11).unwrap().status,
        Status::Ready
    );
    assert_eq!(s.get(&child.id).unwrap().status, Status::Todo);
    assert_board_ok(&*s);
}

fn of(id: &TaskId) -> EventFilter {
    EventFilter {
        task_id: Some(id.clone()),
        ..EventFilter::default()
    }
}

/// `edit --result` fills in a done task's result and its completed run's summary (the
/// result unless given) and metadata; a task not done, or metadata with no completed
/// run, is refused and nothing changes.
pub fn a_done_tasks_result_is_filled_in(board: &dyn Backend) {
    let s = board.connect();
    let backfill = |summary: Option<&str>, metadata| {
        Request::Backfill(Backfill {
            result: "merged as #412".into(),
            summary: summary.map(str::to_owned),
            metadata,
        })
    };
    let t = ready_task(&*s, "ship it");
    assert!(matches!(
        s.transition(&t.id, &backfill(None, None), T0),
        Err(StoreError::Refused(Refusal::WrongStatus { .. }))
    ));
    let run = s.claim(&t.id, 900, T0).unwrap().run_id;
    s.complete(&t.id, &Completion::default(), T0 + 1).unwrap();
    let done = s
        .transition(&t.id, &backfill(None, Some(json!({ "pr": 412 }))), T0 + 2)
        .unwrap();
    assert_eq!(done.result.as_deref(), Some("merged as #412"));
    let kept = s.runs(&t.id).unwrap().pop().unwrap();
    assert_eq!((kept.id, kept.summary.as_deref()), (run, Some("merged as #412")));
    assert_eq!(kept.metadata, Some(json!({ "pr": 412 })));
    s.transition(&t.id, &backfill(Some("short"), None), T0 + 3)
        .unwrap();
    let kept = s.runs(&t.id).unwrap().pop().unwrap();
    assert_eq!(
        (kept.summary.as_deref(), kept.metadata),
        (Some("short"), Some(json!({ "pr": 412 })))
    );
    let bare = ready_task(&*s, "done by hand");
    s.complete(&bare.id, &Completion::default(), T0).unwrap();
    assert_eq!(
        s.transition(&bare.id, &backfill(None, Some(json!(1))), T0 + 1)
            .unwrap_err(),
        StoreError::Refused(Refusal::NoCompletedRun(bare.id.clone()))
    );
    assert_eq!(s.get(&bare.id).unwrap().result, None);
    assert_eq!(
        s.transition(&bare.id, &backfill(None, None), T0 + 1)
            .unwrap()
            .result
            .as_deref(),
        Some("merged as #412")
    );
    assert_board_ok(&*s);
}

/// `schedule` parks a todo, ready, running or blocked task in `scheduled` (a running
/// task's run ends `scheduled`, guarded by its run when asked); nothing claims it, and
/// `unblock` releases it to ready, or to todo while a parent is open.
pub fn a_scheduled_task_waits_until_unblocked(board: &dyn Backend) {
    let s = board.connect();
    let schedule = |expected_run_id| Request::Schedule {
        reason: Some("waits for 02:00".into()),
        expected_run_id,
        until: None,
        every: None,
    };
    let ready = ready_task(&*s, "nightly report");
    let parked = s.transition(&ready.id, &schedule(None), T0).unwrap();
    assert_eq!(parked.status, Status::Scheduled);
    assert!(
        s.claim(&ready.id, 900, T0).is_err(),
        "a scheduled task is never claimed"
    );
    let event = s.events(&of(&ready.id)).unwrap().pop().unwrap();
    assert_eq!(
        (event.kind.as_str(), &event.payload["reason"]),
        ("scheduled", &json!("waits for 02:00"))
    );
    assert_eq!(s.unblock(&ready.id, None, T0 + 1).unwrap().status, Status::Ready);

    let running = ready_task(&*s, "a worker's");
    let run = s.claim(&running.id, 900, T0).unwrap().run_id;
    assert!(matches!(
        s.transition(&running.id, &schedule(Some(run + 100)), T0),
        Err(StoreError::Refused(Refusal::StaleRun { .. }))
    ));
    s.transition(&running.id, &schedule(Some(run)), T0 + 1).unwrap();
    let ended = s.runs(&running.id).unwrap().pop().unwrap();
    assert_eq!(
        (ended.outcome, ended.summary.as_deref()),
        (Some(Outcome::Scheduled), Some("waits for 02:00"))
    );
    assert!(s.get(&running.id).unwrap().lease.is_none());

    let parent = ready_task(&*s, "parent");
    let child = child_of(&*s, &parent.id);
    s.transition(&child.id, &schedule(None), T0).unwrap();
    assert_eq!(s.unblock(&child.id, None, T0 + 1).unwrap().status, Status::Todo);
    s.complete(&parent.id, &Completion::default(), T0 + 2).unwrap();
    assert!(matches!(
        s.transition(&parent.id, &schedule(None), T0 + 3),
        Err(StoreError::Refused(Refusal::WrongStatus { .. }))
    ));
    assert_board_ok(&*s);
}

/// A task created `blocked` (Hermes' `--initial-status blocked`) waits for a person:
/// nothing claims it, and `unblock` releases it to ready, or to todo with an open parent.
pub fn a_task_created_blocked_waits_for_a_person(board: &dyn Backend) {
    let s = board.connect();
    let blocked = |parents: Vec<TaskId>| NewTask {
        blocked: true,
        parents,
        ..NewTask::titled("needs a person first")
    };
    let alone = s.create(&blocked(Vec::new()), T0).unwrap();
    assert_eq!(alone.status, Status::Blocked);
    assert!(s.claim(&alone.id, 900, T0).is_err());
    assert_eq!(s.unblock(&alone.id, None, T0).unwrap().status, Status::Ready);
    let parent = ready_task(&*s, "parent");
    let child = s.create(&blocked(vec![parent.id.clone()]), T0).unwrap();
    assert_eq!(child.status, Status::Blocked);
    assert_eq!(s.unblock(&child.id, None, T0).unwrap().status, Status::Todo);
    assert_board_ok(&*s);
}

/// A new task waiting for `parent`.
fn child_of(s: &dyn crate::Store, parent: &TaskId) -> crate::Task {
    let request = NewTask {
        parents: vec![parent.clone()],
        ..NewTask::titled("child")
    };
    s.create(&request, T0).unwrap()
}
