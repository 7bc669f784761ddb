//! Races of real threads on separate connections: reclaim against completion, many claimers.

use super::{assert_board_ok, counting, ready_task, Backend, T0};
use crate::store::{Completion, ReclaimOutcome, Store, StoreError};
use crate::types::{Outcome, Status, TaskId};
use crate::Refusal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Both racers spin at a start line until every party has arrived, so both leave it
/// together: a sleeping barrier wakes the early arrivals late, and the last one to
/// arrive would nearly always win.
pub(super) struct StartLine {
    arrived: AtomicUsize,
    parties: usize,
}

impl StartLine {
    pub(super) fn new(parties: usize) -> StartLine {
        StartLine {
            arrived: AtomicUsize::new(0),
            parties,
        }
    }

    pub(super) fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut spins = 0u32;
        while self.arrived.load(Ordering::SeqCst) < self.parties {
            assert!(Instant::now() < deadline, "a racer never reached the start line");
            spins += 1;
            // Yield now and then, so a racer not yet scheduled on a busy machine gets a core.
            if spins.is_multiple_of(256) {
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
pub fn reclaim_and_complete_race(board: &dyn Backend, rounds: usize) {
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
    board: &dyn Backend,
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
pub fn concurrent_claims(board: &dyn Backend, threads: usize, tasks: usize) {
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
