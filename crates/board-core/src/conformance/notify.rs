//! Notification subscriptions: a cursor over the events that starts at the newest, moves
//! only past a delivered event and only from where the attempt began; failures back off
//! and pause.

use super::{assert_board_ok, ready_task, Backend, T0};
use crate::notify::{Delivery, NewSubscription, PAUSE_AFTER_FAILURES};
use crate::store::StoreError;
use crate::types::TaskId;
use crate::{EventFilter, Refusal};

fn new(task: Option<&TaskId>) -> NewSubscription {
    NewSubscription {
        task_id: task.cloned(),
        kinds: Vec::new(),
        url: "http://127.0.0.1:9/hook".into(),
        secret: "a-secret-of-16-bytes".into(),
    }
}

pub fn subscriptions_keep_a_cursor_that_moves_only_past_deliveries(board: &dyn Backend) {
    let s = board.connect();
    let unknown: TaskId = "t_00000000".parse().unwrap();
    assert!(matches!(
        s.subscribe(&new(Some(&unknown)), T0),
        Err(StoreError::Refused(Refusal::NoSuchTask(_)))
    ));
    let task = ready_task(&*s, "watched");
    let newest = s
        .events(&EventFilter {
            newest: true,
            limit: Some(1),
            ..EventFilter::default()
        })
        .unwrap()[0]
        .id;
    let board_wide = s.subscribe(&new(None), T0).unwrap();
    let one = s.subscribe(&new(Some(&task.id)), T0).unwrap();
    assert_eq!(
        board_wide.after_event, newest,
        "it hears what happens from now on"
    );
    assert_eq!(board_wide.kinds, crate::notify::DEFAULT_KINDS);
    assert_eq!(s.subscriptions().unwrap(), vec![board_wide.clone(), one.clone()]);

    let failed = Delivery::Failed {
        status: "HTTP 500".into(),
    };
    assert!(s.record_delivery(one.id, newest, &failed, T0 + 10).unwrap());
    let after = &s.subscriptions().unwrap()[1];
    assert_eq!(
        (
            after.failures,
            after.next_attempt_at,
            after.last_status.as_deref(),
            after.after_event
        ),
        (1, Some(T0 + 12), Some("HTTP 500"), newest)
    );
    let delivered = Delivery::Delivered {
        event: newest + 5,
        status: "200".into(),
    };
    assert!(
        !s.record_delivery(one.id, newest - 1, &delivered, T0 + 11)
            .unwrap(),
        "a stale attempt"
    );
    assert!(s.record_delivery(one.id, newest, &delivered, T0 + 12).unwrap());
    let after = &s.subscriptions().unwrap()[1];
    assert_eq!(
        (after.after_event, after.failures, after.next_attempt_at),
        (newest + 5, 0, None)
    );
    for n in 0..PAUSE_AFTER_FAILURES {
        assert!(s
            .record_delivery(one.id, newest + 5, &failed, T0 + 20 + n)
            .unwrap());
    }
    assert!(s.subscriptions().unwrap()[1].paused);
    let resumed = s.resume_subscription(one.id).unwrap();
    assert_eq!(
        (resumed.paused, resumed.failures, resumed.next_attempt_at),
        (false, 0, None)
    );
    assert_eq!(s.unsubscribe(board_wide.id).unwrap().id, board_wide.id);
    for refused in [s.unsubscribe(board_wide.id), s.resume_subscription(board_wide.id)] {
        assert!(matches!(
            refused,
            Err(StoreError::Refused(Refusal::NoSuchSubscription(_)))
        ));
    }
    assert_eq!(s.subscriptions().unwrap().len(), 1);
    assert_board_ok(&*s);
}
