//! Races on the rules that span rows, which PostgreSQL, running writers concurrently,
//! must keep by its locks: a child is released when its last parents finish together,
//! a link or a new child under a finishing parent, links that close a cycle only
//! together, and one idempotency key. Each round starts two writers (separate stores,
//! separate connections) at a barrier. A worker's comment waits for a write in flight
//! that ends its run.

mod common;

use std::sync::Barrier;

use board_core::{
    BoardReads, BoardStats, BoardWrites, Completion, NewTask, Refusal, Status, StoreError, Task, TaskId,
};
use board_postgres::PgStore;
use common::TestSchema;

const ROUNDS: usize = 30;
const T: i64 = 1_750_000_000;

/// Runs `a` and `b` on two threads released together.
fn race<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let a = scope.spawn(|| {
            barrier.wait();
            a()
        });
        let b = scope.spawn(|| {
            barrier.wait();
            b()
        });
        (a.join().expect("first racer"), b.join().expect("second racer"))
    })
}

/// A schema and three stores on it: one to set up and check, two to race.
struct Arena {
    _schema: TestSchema,
    setup: PgStore,
    a: PgStore,
    b: PgStore,
}

impl Arena {
    fn new() -> Arena {
        let schema = TestSchema::new();
        let (setup, a, b) = (schema.open(), schema.open(), schema.open());
        Arena {
            _schema: schema,
            setup,
            a,
            b,
        }
    }

    fn task(&self, title: &str, parents: &[&Task]) -> Task {
        let request = NewTask {
            parents: parents.iter().map(|p| p.id.clone()).collect(),
            ..NewTask::titled(title)
        };
        self.setup.create(&request, T).unwrap()
    }

    fn running(&self, title: &str) -> (Task, i64) {
        let task = self.task(title, &[]);
        let claim = self.setup.claim(&task.id, 900, T).unwrap();
        (task, claim.run_id)
    }

    fn status(&self, id: &TaskId) -> Status {
        self.setup.get(id).unwrap().status
    }

    fn check(&self) {
        let snapshot = self.setup.snapshot().unwrap();
        if let Err(v) = board_core::check_invariants(&snapshot) {
            panic!("{v}");
        }
    }
}

fn complete(store: &PgStore, id: &TaskId, run: i64) -> bool {
    let guarded = Completion {
        expected_run_id: Some(run),
        ..Completion::default()
    };
    store.complete(id, &guarded, T + 1).unwrap()
}

#[test]
fn a_child_is_released_when_its_parents_finish_together() {
    let arena = Arena::new();
    for round in 0..ROUNDS {
        let (p1, run1) = arena.running(&format!("left {round}"));
        let (p2, run2) = arena.running(&format!("right {round}"));
        let child = arena.task(&format!("child {round}"), &[&p1, &p2]);
        assert_eq!(child.status, Status::Todo);
        let (left, right) = race(
            || complete(&arena.a, &p1.id, run1),
            || complete(&arena.b, &p2.id, run2),
        );
        assert!(left && right);
        assert_eq!(arena.status(&child.id), Status::Ready, "round {round}");
    }
    arena.check();
}

#[test]
fn a_link_under_a_finishing_parent_leaves_the_child_ready() {
    let arena = Arena::new();
    for round in 0..ROUNDS {
        let (parent, run) = arena.running(&format!("parent {round}"));
        let child = arena.task(&format!("child {round}"), &[]);
        let (linked, completed) = race(
            || arena.a.link(&parent.id, &child.id, T + 1),
            || complete(&arena.b, &parent.id, run),
        );
        linked.unwrap();
        assert!(completed);
        assert_eq!(arena.status(&child.id), Status::Ready, "round {round}");
    }
    arena.check();
}

#[test]
fn a_child_created_under_a_finishing_parent_is_released() {
    let arena = Arena::new();
    for round in 0..ROUNDS {
        let (parent, run) = arena.running(&format!("parent {round}"));
        let request = NewTask {
            parents: vec![parent.id.clone()],
            ..NewTask::titled(format!("child {round}"))
        };
        let (created, completed) = race(
            || arena.a.create(&request, T + 1),
            || complete(&arena.b, &parent.id, run),
        );
        assert!(completed);
        assert_eq!(arena.status(&created.unwrap().id), Status::Ready, "round {round}");
    }
    arena.check();
}

/// A -> B and C -> D exist; B -> C and D -> A race. Each closes a cycle only with the
/// other, and they lock disjoint rows, so only the link lock stops both.
#[test]
fn links_that_close_a_cycle_together_are_not_both_made() {
    let arena = Arena::new();
    for round in 0..ROUNDS {
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| arena.task(&format!("{n} {round}"), &[]));
        arena.setup.link(&a.id, &b.id, T).unwrap();
        arena.setup.link(&c.id, &d.id, T).unwrap();
        let (bc, da) = race(
            || arena.a.link(&b.id, &c.id, T + 1),
            || arena.b.link(&d.id, &a.id, T + 1),
        );
        let refused =
            |r: &Result<(), StoreError>| matches!(r, Err(StoreError::Refused(Refusal::Cycle { .. })));
        assert!(
            (bc.is_ok() && refused(&da)) || (da.is_ok() && refused(&bc)),
            "round {round}: {bc:?} {da:?}"
        );
    }
    arena.check();
}

#[test]
fn creates_with_one_idempotency_key_make_one_task() {
    let arena = Arena::new();
    for round in 0..ROUNDS {
        let request = NewTask {
            idempotency_key: Some(format!("key {round}")),
            ..NewTask::titled(format!("once {round}"))
        };
        let (first, second) = race(|| arena.a.create(&request, T), || arena.b.create(&request, T));
        assert_eq!(first.unwrap().id, second.unwrap().id, "round {round}");
    }
    assert_eq!(arena.setup.list(&Default::default()).unwrap().len(), ROUNDS);
    arena.check();
}

/// Two writers append events while a follower asks, again and again, for the events
/// after the last id it saw (as `events --follow` does): it must see every event.
#[test]
fn a_follower_of_the_event_stream_misses_no_event() {
    const EDITS: usize = 150;
    let arena = Arena::new();
    let (left, right) = (arena.task("left", &[]), arena.task("right", &[]));
    let writing = std::sync::atomic::AtomicUsize::new(2);
    let edit = |store: &PgStore, id: &TaskId| {
        for i in 0..EDITS {
            store.edit(id, Some(format!("edit {i}")), None, None, T).unwrap();
        }
        writing.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    };
    let seen = std::thread::scope(|scope| {
        scope.spawn(|| edit(&arena.a, &left.id));
        scope.spawn(|| edit(&arena.b, &right.id));
        let mut seen = Vec::new();
        loop {
            let done = writing.load(std::sync::atomic::Ordering::SeqCst) == 0;
            let filter = board_core::EventFilter {
                after_id: seen.last().copied().unwrap_or(0),
                ..Default::default()
            };
            seen.extend(arena.setup.events(&filter).unwrap().iter().map(|e| e.id));
            if done {
                break seen;
            }
        }
    });
    let all: Vec<i64> = arena
        .setup
        .snapshot()
        .unwrap()
        .events
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(all.len(), 2 * EDITS + 2);
    assert_eq!(seen, all, "the follower skipped events");
}

/// A worker's comment waits for a write in flight on its task and is decided on the task
/// as that write leaves it: a write that ends the comment's run (here a raw `UPDATE`
/// standing for a reclaim's, its transaction held open) refuses the comment, never lets
/// it land after the run's end.
#[test]
fn a_comment_waits_for_the_write_that_ends_its_run() {
    let arena = Arena::new();
    let (task, run) = arena.running("commented while reclaimed");
    let mut writer = common::admin();
    let mut tx = writer.transaction().unwrap();
    let tasks = format!("{}.tasks", arena._schema.name);
    let lock = format!("SELECT 1 FROM {tasks} WHERE id = $1 FOR NO KEY UPDATE");
    tx.execute(&lock, &[&task.id.as_str()]).unwrap();
    let xid: String = tx
        .query_one("SELECT pg_current_xact_id()::text", &[])
        .unwrap()
        .get(0);
    let mut watcher = common::admin();
    let waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid'
                   AND transactionid::text = $1 AND NOT granted";
    let result = std::thread::scope(|scope| {
        let comment = scope.spawn(|| arena.a.comment(&task.id, Some("w"), "late", Some(run), T + 1));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let waiters: i64 = watcher.query_one(waiting, &[&xid]).unwrap().get(0);
            if waiters > 0 {
                break;
            }
            assert!(
                !comment.is_finished(),
                "the comment did not wait for the write in flight on its task: {:?}",
                comment.join()
            );
            assert!(
                std::time::Instant::now() < deadline,
                "the comment never started waiting"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let end = format!(
            "UPDATE {tasks} SET status = 'ready', current_run_id = NULL, claim_lock = NULL,
             claim_expires = NULL WHERE id = $1"
        );
        tx.execute(&end, &[&task.id.as_str()]).unwrap();
        tx.commit().unwrap();
        comment.join().expect("the commenter")
    });
    let stale = StoreError::Refused(Refusal::StaleRun {
        id: task.id.clone(),
        expected: run,
        current: None,
    });
    assert_eq!(result.unwrap_err(), stale);
    assert!(arena.setup.comments(&task.id).unwrap().is_empty());
}
