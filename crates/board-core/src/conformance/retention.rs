//! Scenarios of retention: what a sweep removes and keeps, its dry run, its batches.

use super::{ready_task, Backend, T0};
use std::time::Instant;

use crate::retention::{sweep, Freed, GcBatch, Pacer, Sweep, EVENT_STEP};
use crate::store::{EventFilter, Store, StoreError};
use crate::types::{Task, TaskId};
use crate::{check_invariants, Completion, NewTask, Refusal, StatusCount};

/// Every batch timed as instant: the pacer grows the batches to its maximum.
fn sweep_all(s: &dyn Store, before: i64, dry_run: bool, window: usize) -> (Freed, u64) {
    sweep_within(s, before, dry_run, window, 50_000)
}

/// A sweep in batches of `window` rows, each with `budget_micros` from its start as its
/// deadline.
fn sweep_within(
    s: &dyn Store,
    before: i64,
    dry_run: bool,
    window: usize,
    budget_micros: u64,
) -> (Freed, u64) {
    let request = Sweep {
        archived_before: Some(before),
        events_before: Some(before),
        dry_run,
    };
    let mut pacer = Pacer::new(window, window, window, budget_micros);
    let swept = sweep(s, &request, &mut pacer, Instant::now, &mut |batch| (batch(), 0)).expect("sweep");
    (swept.freed, swept.batches)
}

fn done_task(s: &dyn Store, title: &str, heartbeats: i64) -> Task {
    let t = ready_task(s, title);
    let claim = s.claim(&t.id, 900, T0 + 1).unwrap();
    for i in 0..heartbeats {
        assert!(s.heartbeat(&t.id, claim.run_id, 900, None, T0 + 2 + i).unwrap());
    }
    assert!(s.complete(&t.id, &Completion::default(), T0 + 50).unwrap());
    s.get(&t.id).unwrap()
}

fn child_of(s: &dyn Store, parent: &TaskId, title: &str) -> Task {
    let request = NewTask {
        parents: vec![parent.clone()],
        ..NewTask::titled(title)
    };
    s.create(&request, T0).unwrap()
}

fn events_of(s: &dyn Store, ids: &[&TaskId]) -> u64 {
    ids.iter()
        .map(|id| {
            let filter = EventFilter {
                task_id: Some((*id).clone()),
                ..EventFilter::default()
            };
            s.count_events(&filter).unwrap()
        })
        .sum()
}

/// Old archived tasks go with everything of theirs, a whole link component at a time;
/// a component with a live or recent task stays whole; done tasks lose their old
/// routine events only. The dry run changes nothing and counts what the sweep then
/// removes, in batches of any size; the invariants hold after.
pub fn gc_removes_old_archived_components_and_routine_events(board: &dyn Backend) {
    let s = board.connect();
    let before = T0 + 500;
    let lone = done_task(&*s, "lone", 2);
    s.comment(&lone.id, Some("ana"), "noted", None, T0 + 60).unwrap();
    s.archive(&lone.id, T0 + 100).unwrap();
    let (x, y) = {
        let x = ready_task(&*s, "pair parent");
        let y = child_of(&*s, &x.id, "pair child");
        s.archive(&x.id, T0 + 100).unwrap();
        s.archive(&y.id, T0 + 100).unwrap();
        (x, y)
    };
    let held = ready_task(&*s, "parent of a live task");
    let live = child_of(&*s, &held.id, "live child");
    s.archive(&held.id, T0 + 100).unwrap();
    let recent = ready_task(&*s, "archived lately");
    s.archive(&recent.id, T0 + 1000).unwrap();
    let worked = done_task(&*s, "worked", 3);
    let newest = ready_task(&*s, "newest");
    s.comment(&newest.id, None, "now", None, T0 + 2000).unwrap();

    let start = s.snapshot().unwrap();
    // Everything of the three archived tasks, and the three heartbeats of `worked`.
    let gone_events = events_of(&*s, &[&lone.id, &x.id, &y.id]) + 3;
    let (dry, _) = sweep_all(&*s, before, true, 2);
    assert_eq!(s.snapshot().unwrap(), start, "a dry run changes nothing");
    let expected = Freed {
        tasks: 3,
        runs: 1,
        events: gone_events,
        comments: 1,
        links: 1,
    };
    assert_eq!(dry, expected);
    let (freed, batches) = sweep_all(&*s, before, false, 3);
    assert_eq!(freed, dry, "the sweep removes what its dry run counted");
    assert!(batches > 2, "small windows make several batches");
    let missing = |id: &TaskId| StoreError::Refused(Refusal::NoSuchTask(id.clone()));
    for gone in [&lone.id, &x.id, &y.id] {
        assert_eq!(s.get(gone).unwrap_err(), missing(gone));
    }
    for kept in [&held.id, &live.id, &recent.id, &worked.id, &newest.id] {
        s.get(kept).unwrap();
    }
    let kinds: Vec<String> = super::event_kinds(&*s, &worked.id);
    assert_eq!(kinds, ["created", "claimed", "completed"]);
    assert_eq!(
        s.parents(&live.id).unwrap().len(),
        1,
        "the live child keeps its parent"
    );
    let after = s.snapshot().unwrap();
    check_invariants(&after).unwrap();
    assert_eq!(
        sweep_all(&*s, before, false, 1000).0,
        Freed::default(),
        "nothing left to remove"
    );
    s.compact().unwrap();
}

/// Once the live task of a component is archived and old too, the component goes whole.
pub fn gc_takes_a_component_once_all_of_it_is_old(board: &dyn Backend) {
    let s = board.connect();
    let root = ready_task(&*s, "root");
    let a = child_of(&*s, &root.id, "a");
    let b = child_of(&*s, &a.id, "b");
    s.archive(&root.id, T0 + 10).unwrap();
    s.archive(&a.id, T0 + 10).unwrap();
    assert_eq!(sweep_all(&*s, T0 + 500, false, 1).0.tasks, 0, "b is live");
    s.archive(&b.id, T0 + 20).unwrap();
    assert_eq!(
        sweep_all(&*s, T0 + 500, false, 1).0.tasks,
        0,
        "the newest event (b's archival) stays, and its component with it"
    );
    ready_task(&*s, "last");
    let freed = sweep_all(&*s, T0 + 500, false, 1).0;
    assert_eq!((freed.tasks, freed.links), (3, 2));
    let after = s.snapshot().unwrap();
    check_invariants(&after).unwrap();
    assert_eq!(
        s.status_counts().unwrap(),
        StatusCount::of_tasks(&after.tasks),
        "the counts follow the removed tasks"
    );
    assert_eq!(s.list(&Default::default()).unwrap().len(), 1);
}

/// A batch past its deadline starts nothing after its first component or its first step
/// of events, and says where the next one starts; a sweep whose every batch is past its
/// deadline at once still removes what an unhurried one counts.
pub fn gc_batches_stop_at_their_deadline_and_the_sweep_still_ends(board: &dyn Backend) {
    let s = board.connect();
    let before = T0 + 500;
    for title in ["old a", "old b", "old c"] {
        let t = done_task(&*s, title, 1);
        s.archive(&t.id, T0 + 100).unwrap();
    }
    // More heartbeats than one step of events holds.
    done_task(&*s, "worked", EVENT_STEP + 20);
    ready_task(&*s, "newest");
    let (counted, _) = sweep_all(&*s, before, true, 1000);
    assert_eq!(counted.tasks, 3);
    assert!(counted.events > EVENT_STEP as u64);

    let late = GcBatch {
        window: 1000,
        until: Instant::now(),
        clock: Instant::now,
        dry_run: false,
    };
    let (freed, next) = s.gc_archived(before, None, &late).unwrap();
    assert_eq!(freed.tasks, 1, "one component, then the deadline");
    let (again, _) = s.gc_archived(before, next.as_ref(), &late).unwrap();
    assert_eq!(
        again.tasks, 1,
        "the next batch starts at the cursor and takes the next one"
    );
    let (events, next_id) = s.gc_events(before, 0, &late).unwrap();
    assert_eq!(next_id, Some(EVENT_STEP), "one step of ids, then the deadline");
    assert!(events.events > 0 && events.events <= EVENT_STEP as u64);

    let (rest, batches) = sweep_within(&*s, before, false, 1000, 0);
    let mut total = freed;
    total.add(again);
    total.add(events);
    total.add(rest);
    assert_eq!(
        total, counted,
        "every batch stopped early, and the sweep still removed it all"
    );
    // The last component, then the events a step of ids at a time (two steps).
    assert!(batches >= 3, "a batch per component and per step: {batches}");
    check_invariants(&s.snapshot().unwrap()).unwrap();
}

/// The newest event's id on the board.
fn newest_event_id(s: &dyn Store) -> i64 {
    let head = EventFilter {
        limit: Some(1),
        newest: true,
        ..EventFilter::default()
    };
    s.events(&head).unwrap().last().map_or(0, |e| e.id)
}

/// `archive --rm`: an archived task whose link component is all archived is deleted
/// alone, with every row of its own; an unknown, live or live-linked one is refused and
/// nothing changes; the ids of removed events, the newest included, are never handed
/// out again.
pub fn remove_archived_deletes_one_task_and_never_reuses_event_ids(board: &dyn Backend) {
    let s = board.connect();
    let parent = done_task(&*s, "parent", 1);
    s.comment(&parent.id, Some("ana"), "noted", None, T0 + 60)
        .unwrap();
    let child = child_of(&*s, &parent.id, "child");
    let unknown: TaskId = "t_00000000".parse().unwrap();
    let refused = |id: &TaskId| match s.remove_archived(id) {
        Err(StoreError::Refused(refusal)) => refusal,
        other => panic!("removing {id} was not refused: {other:?}"),
    };
    assert_eq!(refused(&unknown), Refusal::NoSuchTask(unknown.clone()));
    assert_eq!(refused(&parent.id), Refusal::NotArchived(parent.id.clone()));
    s.archive(&parent.id, T0 + 100).unwrap();
    let before = s.snapshot().unwrap();
    assert_eq!(
        refused(&parent.id),
        Refusal::LinkedToLive {
            id: parent.id.clone(),
            other: child.id.clone()
        }
    );
    assert_eq!(s.snapshot().unwrap(), before, "a refusal removes nothing");

    s.archive(&child.id, T0 + 110).unwrap();
    let newest = newest_event_id(&*s);
    let child_events = events_of(&*s, &[&child.id]);
    let freed = s.remove_archived(&child.id).unwrap();
    assert_eq!(
        freed,
        Freed {
            tasks: 1,
            runs: 0,
            events: child_events,
            comments: 0,
            links: 1
        }
    );
    assert!(newest_event_id(&*s) < newest, "the child held the newest event");
    let after = s.snapshot().unwrap();
    check_invariants(&after).unwrap();
    assert_eq!(s.status_counts().unwrap(), StatusCount::of_tasks(&after.tasks));
    assert_eq!(s.get(&parent.id).unwrap().status, crate::Status::Archived);

    let next = ready_task(&*s, "next");
    assert!(
        newest_event_id(&*s) > newest,
        "a removed event id is handed out again"
    );
    let parent_events = events_of(&*s, &[&parent.id]);
    let freed = s.remove_archived(&parent.id).unwrap();
    assert_eq!(
        (freed.tasks, freed.runs, freed.events, freed.comments, freed.links),
        (1, 1, parent_events, 1, 0)
    );
    assert!(matches!(
        s.get(&parent.id),
        Err(StoreError::Refused(Refusal::NoSuchTask(_)))
    ));
    assert_eq!(
        s.list(&Default::default()).unwrap(),
        vec![s.get(&next.id).unwrap()]
    );
    check_invariants(&s.snapshot().unwrap()).unwrap();
}
