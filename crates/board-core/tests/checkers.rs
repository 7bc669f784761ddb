//! The invariant checkers against hand-built boards: every rule they enforce is broken
//! once, on an otherwise valid board, and must be reported under its own number.
//!
//! Every property and race test stands on these two functions; a checker that wrongly
//! answers `Ok` would turn all of them green, so each rule is proven to fire here.

use board_core::graph::blank_task;
use board_core::RunStatus;
use board_core::{
    check_invariants, check_step, BoardSnapshot, Event, Lease, Link, Outcome, Run, Status, Task, TaskId,
};

const T: i64 = 1_750_000_000;

fn id(n: u8) -> TaskId {
    TaskId::from_random([0, 0, 0, n])
}

fn task(n: u8, status: Status) -> Task {
    blank_task(id(n), format!("task {n}"), status, T)
}

fn run(run_id: i64, task: u8, ended_as: Option<Outcome>) -> Run {
    Run {
        id: run_id,
        task_id: id(task),
        profile: None,
        status: if ended_as.is_some() {
            RunStatus::Ended
        } else {
            RunStatus::Running
        },
        outcome: ended_as,
        claim_lock: Some(format!("lock-{run_id}")),
        claim_expires: None,
        worker_pid: None,
        worker_host: None,
        last_heartbeat_at: None,
        started_at: T,
        ended_at: ended_as.map(|_| T + 1),
        summary: None,
        error: None,
        metadata: None,
        kind: board_core::RunKind::Work,
        checks: board_core::Checks::default(),
        evidence: None,
        lane: None,
    }
}

/// The lease of run `run_id`, as a claim takes it.
fn lease(run_id: i64) -> Option<Lease> {
    Some(Lease {
        run_id,
        claim_lock: format!("lock-{run_id}"),
        expires: T + 900,
        worker_pid: None,
        worker_host: None,
        last_heartbeat_at: None,
        lane: None,
    })
}

fn link(parent: u8, child: u8) -> Link {
    Link {
        parent_id: id(parent),
        child_id: id(child),
    }
}

fn event(event_id: i64, task: u8) -> Event {
    Event {
        id: event_id,
        task_id: id(task),
        run_id: None,
        kind: "created".to_owned(),
        payload: serde_json::json!({}),
        created_at: T,
    }
}

/// A valid board touching every rule: 1 done with its child 2 ready, 3 running run 1,
/// 4 blocked after run 2, 6 in triage holding back its todo child 5, 7 archived.
fn valid() -> BoardSnapshot {
    let mut running = task(3, Status::Running);
    running.lease = lease(1);
    BoardSnapshot {
        tasks: vec![
            task(1, Status::Done),
            task(2, Status::Ready),
            running,
            task(4, Status::Blocked),
            task(5, Status::Todo),
            task(6, Status::Triage),
            task(7, Status::Archived),
        ],
        runs: vec![run(1, 3, None), run(2, 4, Some(Outcome::Blocked))],
        links: vec![link(1, 2), link(6, 5)],
        events: (1..=7).map(|n| event(n.into(), n)).collect(),
    }
}

fn task_mut(board: &mut BoardSnapshot, n: u8) -> &mut Task {
    board
        .tasks
        .iter_mut()
        .find(|t| t.id == id(n))
        .expect("task on the board")
}

/// One test per rule of a checker: each changes the valid board so that it breaks one
/// rule, and expects the checker to report that rule's number with the fragment in its
/// detail.
macro_rules! refused_by {
    ($check:expr; $($name:ident: $number:literal, $fragment:literal, |$b:ident| $change:block)+) => {$(
        #[test]
        fn $name() {
            let mut board = valid();
            let $b = &mut board;
            $change
            let v = ($check)(&board).expect_err("the checker must refuse this");
            assert_eq!(v.number, $number, "{v}");
            assert!(v.detail.contains($fragment), "expected {:?} in: {v}", $fragment);
        }
    )+};
}

#[test]
fn the_valid_board_passes() {
    check_invariants(&valid()).unwrap();
}

refused_by! {
    check_invariants;
    inv1_running_task_without_a_current_run: 1, "is running with current_run_id None", |b| {
        task_mut(b, 3).lease = None;
        b.runs[0] = run(1, 3, Some(Outcome::Reclaimed));
    }
    inv1_current_run_on_a_task_that_is_not_running: 1, "is ready with current_run_id Some(1)", |b| {
        task_mut(b, 3).status = Status::Ready;
    }
    inv1_current_run_that_has_ended: 1, "open runs []", |b| {
        b.runs[0] = run(1, 3, Some(Outcome::Crashed));
    }
    inv1_current_run_that_belongs_to_another_task: 1, "current_run_id Some(2)", |b| {
        task_mut(b, 3).lease = lease(2);
    }
    inv1_open_run_on_a_task_that_is_not_running: 1, "open runs [9]", |b| {
        b.runs.push(run(9, 2, None));
    }
    inv2_run_of_no_task: 2, "belongs to no task", |b| {
        b.runs.push(run(9, 99, Some(Outcome::Crashed)));
    }
    inv2_open_run_with_an_outcome: 2, "open run 1 has an outcome", |b| {
        b.runs[0].outcome = Some(Outcome::Completed);
    }
    inv2_closed_run_without_an_outcome: 2, "closed run 2 has no outcome", |b| {
        b.runs[1].outcome = None;
    }
    inv2_two_open_runs: 2, "has 2 open runs", |b| {
        b.runs.push(run(9, 3, None));
    }
    inv6_ready_child_of_an_open_parent: 6, "is ready while parent", |b| {
        b.links.push(link(6, 2));
    }
    inv6_running_child_of_an_open_parent: 6, "is running while parent", |b| {
        b.links.push(link(4, 3));
    }
    inv6_child_of_a_parent_missing_from_the_board: 6, "is None", |b| {
        b.links.push(link(99, 2));
    }
    inv7_self_link: 7, "linked to itself", |b| {
        b.links.push(link(5, 5));
    }
    inv7_two_task_cycle: 7, "a link cycle passes through", |b| {
        b.links.push(link(5, 6));
    }
    inv7_longer_cycle_behind_an_acyclic_branch: 7, "a link cycle passes through", |b| {
        b.links.extend([link(1, 4), link(5, 4), link(4, 6)]);
    }
    inv8_repeated_event_id: 8, "event ids out of order at 2", |b| {
        b.events[2].id = 2;
    }
    inv8_decreasing_event_ids: 8, "event ids out of order at 6", |b| {
        b.events.reverse();
    }
}

#[test]
fn inv7_a_diamond_is_no_cycle() {
    let mut board = valid();
    board
        .links
        .extend([link(6, 4), link(4, 5), link(1, 4), link(1, 5)]);
    check_invariants(&board).unwrap();
}

/// `valid()` after task 2 was claimed under run 3, with its event.
fn claimed() -> BoardSnapshot {
    let mut after = valid();
    let t = task_mut(&mut after, 2);
    t.status = Status::Running;
    t.lease = lease(3);
    t.updated_at = T + 5;
    after.runs.push(run(3, 2, None));
    after.events.push(event(8, 2));
    after
}

#[test]
fn step_a_claim_with_its_event_passes() {
    let after = claimed();
    check_invariants(&after).unwrap();
    check_step(&valid(), &after).unwrap();
}

#[test]
fn step_done_to_archived_passes() {
    let mut after = valid();
    task_mut(&mut after, 1).status = Status::Archived;
    after.events.push(event(8, 1));
    check_step(&valid(), &after).unwrap();
}

#[test]
fn step_only_updated_at_needs_no_event() {
    let mut after = valid();
    task_mut(&mut after, 4).updated_at = T + 60;
    check_step(&valid(), &after).unwrap();
}

refused_by! {
    |after: &BoardSnapshot| check_step(&valid(), after);
    inv5_done_left_for_ready: 5, "left done for ready", |b| {
        task_mut(b, 1).status = Status::Ready;
        b.events.push(event(8, 1));
    }
    inv5_archived_left_for_ready: 5, "left archived for ready", |b| {
        task_mut(b, 7).status = Status::Ready;
        b.events.push(event(8, 7));
    }
    inv5_archived_left_for_done: 5, "left archived for done", |b| {
        task_mut(b, 7).status = Status::Done;
        b.events.push(event(8, 7));
    }
    inv8_change_without_an_event: 8, "changed without an event", |b| {
        task_mut(b, 2).title = "renamed".to_owned();
    }
    inv8_change_with_only_another_tasks_event: 8, "t_00000004 changed without an event", |b| {
        task_mut(b, 4).priority = 9;
        b.events.push(event(8, 5));
    }
    inv8_task_created_without_an_event: 8, "created without an event", |b| {
        b.tasks.push(task(8, Status::Ready));
    }
    inv8_task_row_disappeared: 8, "rows disappeared", |b| {
        b.tasks.retain(|t| t.id != id(6));
    }
    inv8_run_row_disappeared: 8, "rows disappeared", |b| {
        b.runs.pop();
    }
}

#[test]
fn inv8_claim_without_its_event() {
    let mut after = claimed();
    after.events.pop();
    let v = check_step(&valid(), &after).unwrap_err();
    assert_eq!(
        (v.number, v.detail.as_str()),
        (8, "t_00000002 changed without an event")
    );
}
