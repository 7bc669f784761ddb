//! Scenarios of the task graph and task fields: dependencies, cycles, idempotent create,
//! edit, assign and archive.

use super::{assert_board_ok, ready_task, Backend, T0};
use crate::store::{Completion, StoreError};
use crate::types::{Outcome, Status, TaskId};
use crate::{NewTask, Refusal};

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
