//! `PgStore::claim_next`: claimers sharing the ready queue take each task once, in
//! claim order, and skip a row another transaction holds instead of waiting for it.

mod common;

use std::collections::BTreeSet;
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use board_core::{BoardReads, BoardStats, BoardWrites, DispatchQueue};
use board_core::{NewTask, Status, Store, TaskId};
use common::TestSchema;

const T: i64 = 1_750_000_000;

fn task(store: &dyn Store, title: &str, priority: i64) -> TaskId {
    let request = NewTask {
        priority,
        ..NewTask::titled(title)
    };
    store.create(&request, T).unwrap().id
}

#[test]
fn claim_next_takes_tasks_in_claim_order() {
    let schema = TestSchema::new();
    let store = schema.open();
    let low = task(&store, "low", 0);
    let high = task(&store, "high", 5);
    let later = task(&store, "later high", 5);
    let claims = store.claim_next(2, 60, T).unwrap();
    let ids: Vec<TaskId> = claims.iter().map(|c| c.task.id.clone()).collect();
    assert_eq!(ids, vec![high.clone(), later]);
    for claim in &claims {
        let task = store.get(&claim.task.id).unwrap();
        assert_eq!(task.status, Status::Running);
        assert_eq!(task.current_run_id(), Some(claim.run_id));
        assert_eq!(task.lease.map(|l| l.claim_lock).as_ref(), Some(&claim.claim_lock));
    }
    assert_eq!(
        store
            .claimable(10)
            .unwrap()
            .iter()
            .map(|t| &t.id)
            .collect::<Vec<_>>(),
        vec![&low]
    );
    assert!(store.claim_next(2, 0, T).is_err(), "a zero ttl is refused");
    board_core::check_invariants(&store.snapshot().unwrap()).unwrap();
}

#[test]
fn claimers_sharing_the_queue_take_each_task_once() {
    const TASKS: usize = 120;
    const CLAIMERS: usize = 4;
    let schema = TestSchema::new();
    let setup = schema.open();
    for i in 0..TASKS {
        task(&setup, &format!("job {i}"), (i % 3) as i64);
    }
    let barrier = Barrier::new(CLAIMERS);
    let taken: Vec<TaskId> = std::thread::scope(|scope| {
        let claimers: Vec<_> = (0..CLAIMERS)
            .map(|_| {
                let (store, barrier) = (schema.open(), &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let mut mine = Vec::new();
                    loop {
                        let batch = store.claim_next(3, 60, T).expect("no claim error");
                        if batch.is_empty() {
                            return mine;
                        }
                        mine.extend(batch.into_iter().map(|c| c.task.id));
                    }
                })
            })
            .collect();
        claimers.into_iter().flat_map(|c| c.join().unwrap()).collect()
    });
    let unique: BTreeSet<&TaskId> = taken.iter().collect();
    assert_eq!(
        (taken.len(), unique.len()),
        (TASKS, TASKS),
        "each task claimed once"
    );
    let snapshot = setup.snapshot().unwrap();
    assert_eq!(snapshot.runs.len(), TASKS, "no orphan run");
    board_core::check_invariants(&snapshot).unwrap();
}

#[test]
fn a_row_held_by_another_transaction_is_skipped_without_waiting() {
    let schema = TestSchema::new();
    let store = Arc::new(schema.open());
    let first = task(&*store, "first in line", 5);
    let second = task(&*store, "second", 0);
    let mut holder = common::admin();
    let mut held = holder.transaction().unwrap();
    let hold = format!("SELECT id FROM {}.tasks WHERE id = $1 FOR UPDATE", schema.name);
    assert_eq!(held.query(&hold, &[&first.as_str()]).unwrap().len(), 1);
    let (send, claimed) = mpsc::channel();
    let claimer = Arc::clone(&store);
    std::thread::spawn(move || {
        let _ = send.send(claimer.claim_next(1, 60, T));
    });
    let wait = Duration::from_secs(20);
    let claims = match claimed.recv_timeout(wait) {
        Ok(claims) => claims.unwrap(),
        Err(_) => panic!("claim_next waited more than {wait:?} on a held row"),
    };
    assert_eq!(claims.len(), 1);
    assert_eq!(
        claims[0].task.id, second,
        "the held task is skipped, the next one taken"
    );
    held.rollback().unwrap();
    let claims = store.claim_next(1, 60, T).unwrap();
    assert_eq!(claims[0].task.id, first, "released, it is claimed next");
}

/// The task's guarded update and its run's upsert are one statement: when the update
/// changes no row (here a trigger skips it), the write is refused as a changed claim
/// and nothing of it is left, neither the run nor an event.
#[test]
fn a_claim_whose_task_row_is_not_written_is_refused_and_leaves_nothing() {
    let schema = TestSchema::new();
    let store = schema.open();
    let id = task(&store, "guarded", 0);
    let before = schema.dump();
    schema.execute(
        "CREATE FUNCTION skip_update() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
         CREATE TRIGGER skip_update BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION skip_update()",
    );
    let refused = store.claim(&id, 60, T).expect_err("the update changed no row");
    assert!(
        matches!(
            refused,
            board_core::StoreError::Refused(board_core::Refusal::ClaimChanged { .. })
        ),
        "{refused:?}"
    );
    assert_eq!(schema.dump(), before, "nothing of the refused claim stays");
    schema.execute("DROP TRIGGER skip_update ON tasks");
    let claim = store.claim(&id, 60, T).expect("the same claim, the row written");
    assert_eq!(store.get(&id).unwrap().current_run_id(), Some(claim.run_id));
}
