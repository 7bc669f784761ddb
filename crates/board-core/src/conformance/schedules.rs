//! Scenarios of work that waits for a time: `schedule --at` parks a task until then, the
//! gateway's read finds it due, and `Resume` puts it back to work.

use super::{assert_board_ok, ready_task, Backend, T0};
use crate::store::StoreError;
use crate::types::Status;
use crate::types::TaskId;
use crate::{EventFilter, Every, NewTask, Recurrence, Recurring, Refusal, Request};

fn until(at: Option<i64>) -> Request {
    Request::Schedule {
        reason: Some("after the freeze".into()),
        expected_run_id: None,
        until: at,
        every: None,
    }
}

fn every(seconds: i64, first: i64) -> Request {
    Request::Schedule {
        reason: None,
        expected_run_id: None,
        until: Some(first),
        every: Some(Recurrence::new(Every::Seconds(seconds)).unwrap()),
    }
}

fn recur(copy: Option<&TaskId>, next: i64, missed: i64) -> Request {
    Request::Recur(Recurring {
        copy: copy.cloned(),
        next,
        missed,
    })
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

/// A recurring task waits in `scheduled` as its template: when its time came, `Recur`
/// records the copy made (or a time skipped while the last copy is open) and moves the
/// template to its next time, once per time; any step out of `scheduled` ends the rule.
pub fn a_recurring_task_records_its_copies_and_moves_on(board: &dyn Backend) {
    let s = board.connect();
    let template = ready_task(&*s, "nightly report");
    assert!(matches!(
        s.transition(
            &template.id,
            &Request::Schedule {
                reason: None,
                expected_run_id: None,
                until: None,
                every: Some(Recurrence::new(Every::Seconds(60)).unwrap()),
            },
            T0
        ),
        Err(StoreError::Refused(Refusal::Invalid(_)))
    ));
    let parked = s.transition(&template.id, &every(60, T0 + 60), T0).unwrap();
    assert_eq!(parked.recurrence.as_ref().unwrap().every, Every::Seconds(60));
    assert_eq!(s.due_scheduled(T0 + 60, 10).unwrap(), vec![template.id.clone()]);
    // Not before its time, not to a time that is not ahead, not for a plain task.
    for (request, at) in [
        (recur(None, T0 + 120, 0), T0 + 59),
        (recur(None, T0 + 60, 0), T0 + 60),
    ] {
        assert!(matches!(
            s.transition(&template.id, &request, at),
            Err(StoreError::Refused(Refusal::Invalid(_)))
        ));
    }
    let copy = ready_task(&*s, "nightly report (copy)");
    let moved = s
        .transition(&template.id, &recur(Some(&copy.id), T0 + 240, 2), T0 + 200)
        .unwrap();
    assert_eq!(
        (moved.status, moved.scheduled_until),
        (Status::Scheduled, Some(T0 + 240))
    );
    let rule = moved.recurrence.clone().unwrap();
    assert_eq!((rule.last_copy.as_ref(), rule.copies), (Some(&copy.id), 1));
    // A second gateway that read the same time loses: the time moved on.
    assert!(matches!(
        s.transition(&template.id, &recur(Some(&copy.id), T0 + 240, 2), T0 + 201),
        Err(StoreError::Refused(Refusal::Invalid(_)))
    ));
    let skipped = s
        .transition(&template.id, &recur(None, T0 + 300, 0), T0 + 240)
        .unwrap();
    assert_eq!(skipped.recurrence.as_ref().unwrap().copies, 1);
    let recurred = s
        .events(&EventFilter {
            task_id: Some(template.id.clone()),
            kinds: vec!["recurred".into()],
            ..EventFilter::default()
        })
        .unwrap();
    assert_eq!(recurred.len(), 2);
    assert_eq!(recurred[0].payload["copy"], copy.id.as_str());
    assert_eq!(
        (
            recurred[0].payload["due"].as_i64(),
            recurred[0].payload["missed"].as_i64()
        ),
        (Some(T0 + 60), Some(2))
    );
    assert_eq!(recurred[1].payload["skipped_while_open"], copy.id.as_str());
    // Scheduled anew with a time, it keeps its rule; a person's unblock ends it.
    let again = s
        .transition(&template.id, &until(Some(T0 + 500)), T0 + 250)
        .unwrap();
    assert_eq!(again.recurrence, skipped.recurrence);
    let released = s.unblock(&template.id, None, T0 + 251).unwrap();
    assert_eq!((released.status, released.recurrence), (Status::Ready, None));
    assert!(matches!(
        s.transition(&template.id, &recur(None, T0 + 600, 0), T0 + 550),
        Err(StoreError::Refused(Refusal::WrongStatus { .. }))
    ));
    assert_board_ok(&*s);
}
