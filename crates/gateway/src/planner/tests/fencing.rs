//! The fencing rule for live workers (docs/gateway.md): a gateway keeps a worker while
//! its run is open, even past its lease (nobody may have taken it over, and the worker's
//! report would still count), and stops it once the board says the run ended without
//! it, writing nothing of that run.

use super::*;

fn ended(mut w: WorkerView, outcome: Outcome) -> WorkerView {
    w.run_ended = Some(outcome);
    w
}

#[test]
fn a_live_worker_whose_run_ended_without_it_is_disowned_once_and_let_go_once_gone() {
    for outcome in [
        Outcome::Stale,
        Outcome::Reclaimed,
        Outcome::TimedOut,
        Outcome::Crashed,
    ] {
        let view = View {
            workers: vec![ended(held(1, Observed::Alive), outcome)],
            ..View::default()
        };
        let actions = plan(&view, T, &settings());
        assert_eq!(kinds(&actions), [("disown", id(1))], "{outcome}");
        assert_eq!(
            actions[0],
            Action::Disown {
                task: id(1),
                run: run(1),
                outcome
            }
        );
        assert_eq!(preview(&actions, 0).disowned, [id(1)]);
    }
    let lost = StopReason::Lost {
        outcome: Outcome::Stale,
    };
    let disowned = |observed: Observed, since: Timestamp| {
        let mut w = held(1, observed);
        w.stopping = Some(Stopping {
            run: run(1),
            reason: lost.clone(),
            since,
        });
        w.run_ended = Some(Outcome::Stale);
        View {
            workers: vec![w],
            ..View::default()
        }
    };
    assert_eq!(
        planned(&disowned(Observed::Alive, T)),
        [],
        "asked once, within its grace"
    );
    let over = T - STOP_GRACE_SECONDS - 1;
    assert_eq!(planned(&disowned(Observed::Alive, over)), [("kill", id(1))]);
    assert_eq!(
        planned(&disowned(exited(143), over)),
        [("let go", id(1))],
        "gone: let go, its run not ended again"
    );
    assert_eq!(lost.ending("tail"), None);
}

#[test]
fn a_live_worker_that_reported_its_run_is_left_to_exit() {
    for outcome in [Outcome::Completed, Outcome::Blocked] {
        let view = View {
            workers: vec![ended(held(1, Observed::Alive), outcome)],
            ..View::default()
        };
        assert_eq!(planned(&view), [], "{outcome}");
    }
}

#[test]
fn a_live_worker_past_its_lease_with_its_run_open_is_kept_and_its_lease_extended() {
    // Cut off past its lease and back: nobody took the run over, so it is still its.
    let late = Task {
        lease: running(1).lease.map(|l| Lease { expires: T - 60, ..l }),
        ..running(1)
    };
    let view = View {
        workers: vec![held(1, Observed::Alive)],
        running: vec![late.clone()],
        expired: vec![late],
        ..View::default()
    };
    assert_eq!(planned(&view), [("extend", id(1))]);
}

#[test]
fn a_held_worker_of_an_earlier_run_is_not_the_live_worker_of_the_tasks_new_run() {
    // Host A's worker lost run 1; the task's run 2, another host's, expired with no
    // worker proven: it ends stale, and A's worker is not signalled for it.
    let mut again = expired(running(2));
    again.id = id(1);
    let view = View {
        workers: vec![held(1, Observed::Alive)],
        running: vec![again.clone()],
        expired: vec![again],
        ..View::default()
    };
    let actions = plan(&view, T, &settings());
    assert_eq!(kinds(&actions), [("end", id(1))]);
    let Action::EndRun { run: r, held, .. } = &actions[0] else {
        panic!("{actions:?}")
    };
    assert_eq!((r, *held), (&run(2), false));
}
