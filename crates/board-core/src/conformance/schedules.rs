//! Scenarios of work that waits for a time: `schedule --at` parks a task until then, the
//! gateway's read finds it due, and `Resume` puts it back to work.

use super::{assert_board_ok, ready_task, Backend, T0};
use crate::store::StoreError;
use crate::types::Status;
use crate::{EventFilter, NewTask, Refusal, Request};

fn until(at: Option<i64>) -> Request {
    Request::Schedule {
        reason: Some("after the freeze".into()),
        expected_run_id: None,
        until: at,
    }
}

/// A task scheduled until a time is due then and not before, earliest first; resuming it
/// puts it back to work (todo while a parent is open) and clears its time, once.
pub fn a_task_scheduled_until_a_time_resumes_then(board: &dyn Backend) {
    let s = board.connect();
    let later = ready_task(&*s, "later");
    let sooner = ready_task(&*s, "sooner");
    let parked = s.transition(&later.id, &until(Some(T0 + 100)), T0).unwrap();
    assert_eq!(
        (parked.status, parked.scheduled_until),
        (Status::Scheduled, Some(T0 + 100))
    );
    s.transition(&sooner.id, &until(Some(T0 + 50)), T0).unwrap();
    let event = s
        .events(&EventFilter {
            task_id: Some(later.id.clone()),
            kinds: vec!["scheduled".into()],
            ..EventFilter::default()
        })
        .unwrap();
    assert_eq!(event[0].payload["until"], T0 + 100);
    assert!(s.due_scheduled(T0 + 49, 10).unwrap().is_empty());
    assert_eq!(s.next_scheduled(T0).unwrap(), Some(T0 + 50));
    assert_eq!(s.next_scheduled(T0 + 50).unwrap(), Some(T0 + 100));
    assert_eq!(s.next_scheduled(T0 + 100).unwrap(), None);
    assert_eq!(
        s.due_scheduled(T0 + 100, 10).unwrap(),
        vec![sooner.id.clone(), later.id.clone()]
    );
    assert_eq!(s.due_scheduled(T0 + 100, 1).unwrap(), vec![sooner.id.clone()]);
    assert!(matches!(
        s.transition(&later.id, &Request::Resume, T0 + 99),
        Err(StoreError::Refused(Refusal::Invalid(_)))
    ));
    let resumed = s.transition(&later.id, &Request::Resume, T0 + 100).unwrap();
    assert_eq!((resumed.status, resumed.scheduled_until), (Status::Ready, None));
    assert!(matches!(
        s.transition(&later.id, &Request::Resume, T0 + 101),
        Err(StoreError::Refused(Refusal::WrongStatus { .. }))
    ));
    assert_eq!(s.due_scheduled(T0 + 200, 10).unwrap(), vec![sooner.id.clone()]);

    // Scheduled anew with a time, the time is replaced (without one, it is refused); a
    // person's unblock clears it.
    assert!(matches!(
        s.transition(&sooner.id, &until(None), T0 + 60),
        Err(StoreError::Refused(Refusal::WrongStatus { .. }))
    ));
    s.transition(&sooner.id, &until(Some(T0 + 300)), T0 + 60).unwrap();
    assert!(s.due_scheduled(T0 + 200, 10).unwrap().is_empty());
    let unblocked = s.unblock(&sooner.id, None, T0 + 61).unwrap();
    assert_eq!(
        (unblocked.status, unblocked.scheduled_until),
        (Status::Ready, None)
    );
    assert!(s.due_scheduled(T0 + 400, 10).unwrap().is_empty());

    let parent = ready_task(&*s, "parent");
    let child = s
        .create(
            &NewTask {
                parents: vec![parent.id.clone()],
                ..NewTask::titled("child")
            },
            T0,
        )
        .unwrap();
    s.transition(&child.id, &until(Some(T0 + 10)), T0).unwrap();
    assert_eq!(
        s.transition(&child.id, &Request::Resume, T0 + 10).unwrap().status,
        Status::Todo
    );
    assert_board_ok(&*s);
}

/// A time that is not ahead is refused and changes nothing; a task scheduled with no
/// time is never due and waits for a person.
pub fn a_schedule_without_a_time_ahead_waits_for_a_person(board: &dyn Backend) {
    let s = board.connect();
    let t = ready_task(&*s, "now or never");
    for at in [T0, T0 - 1] {
        assert!(matches!(
            s.transition(&t.id, &until(Some(at)), T0),
            Err(StoreError::Refused(Refusal::Invalid(_)))
        ));
    }
    assert_eq!(s.get(&t.id).unwrap().status, Status::Ready);
    s.transition(&t.id, &until(None), T0).unwrap();
    assert!(s.due_scheduled(i64::MAX, 10).unwrap().is_empty());
    assert!(matches!(
        s.transition(&t.id, &Request::Resume, T0 + 1_000_000),
        Err(StoreError::Refused(Refusal::Invalid(_)))
    ));
    assert_eq!(s.unblock(&t.id, None, T0 + 1).unwrap().status, Status::Ready);
    assert_board_ok(&*s);
}
