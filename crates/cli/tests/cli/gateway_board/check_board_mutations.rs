//! `check_board` checked: a board made by the real binary passes, and each rule rejects
//! a copy of it broken in the one way that rule is for, with that rule's message. A
//! rule that wrongly passed would turn every suite that ends with `check_board` green.

use board_core::{BoardSnapshot, Event, Status, TaskId};
use fake_llm::Reply;

use crate::gateway_board::{check_board, GatewayBoard, Setup};

/// Two children, the second waiting for the first.
const PAIR: &str = r#"{"fanout": true, "rationale": "two", "tasks": [
    {"title": "first", "body": "a", "parents": []},
    {"title": "second", "body": "b", "parents": [0]}]}"#;

/// The board's ids by role, and the snapshot holding them.
struct Made {
    snapshot: BoardSnapshot,
    root: TaskId,
    first: TaskId,
    second: TaskId,
    done: TaskId,
    reclaimed: TaskId,
    running: TaskId,
    ready: TaskId,
}

/// A board with every shape the rules look at: a decomposition with a sibling link,
/// a done task, an archived one, a reclaimed run and an open one.
fn made() -> Made {
    let b = GatewayBoard::new(Setup::default());
    b.reply("split me", Reply::text(PAIR));
    let root = b.create(&["split me", "--triage"]);
    b.kanban_ok(&["decompose", root.as_str()]);
    let done = b.create(&["done"]);
    b.kanban_ok(&["claim", done.as_str()]);
    b.kanban_ok(&["complete", done.as_str(), "--result", "ok"]);
    let archived = b.create(&["archived"]);
    b.kanban_ok(&["complete", archived.as_str()]);
    b.kanban_ok(&["archive", archived.as_str()]);
    let reclaimed = b.create(&["reclaimed"]);
    b.kanban_ok(&["claim", reclaimed.as_str()]);
    b.kanban_ok(&["reclaim", reclaimed.as_str()]);
    let running = b.create(&["running"]);
    b.kanban_ok(&["claim", running.as_str()]);
    let ready = b.create(&["ready"]);
    let snapshot = b.snapshot();
    let children: Vec<TaskId> = snapshot
        .links
        .iter()
        .filter(|l| l.child_id == root)
        .map(|l| l.parent_id.clone())
        .collect();
    assert_eq!(children.len(), 2, "the decomposition landed");
    let by_title = |title: &str| {
        let task = snapshot.tasks.iter().find(|t| t.title == title);
        task.map(|t| t.id.clone()).expect(title)
    };
    let (first, second) = (by_title("first"), by_title("second"));
    Made {
        snapshot,
        root,
        first,
        second,
        done,
        reclaimed,
        running,
        ready,
    }
}

fn events_of<'a>(s: &'a mut BoardSnapshot, task: &TaskId, kind: &str) -> Vec<&'a mut Event> {
    s.events
        .iter_mut()
        .filter(|e| &e.task_id == task && e.kind == kind)
        .collect()
}

fn drop_events(s: &mut BoardSnapshot, task: &TaskId, kind: Option<&str>) {
    s.events
        .retain(|e| &e.task_id != task || kind.is_some_and(|k| e.kind != k));
}

fn set_status(s: &mut BoardSnapshot, task: &TaskId, status: Status) {
    let task = s.tasks.iter_mut().find(|t| &t.id == task).unwrap();
    task.status = status;
}

/// A copy of `e` appended as the newest event.
fn append(s: &mut BoardSnapshot, e: Event) {
    let id = s.events.last().map_or(1, |last| last.id + 1);
    s.events.push(Event { id, ..e });
}

type Mutation = Box<dyn Fn(&Made, &mut BoardSnapshot)>;

#[test]
fn check_board_rejects_each_kind_of_broken_board() {
    let m = made();
    check_board(&m.snapshot).expect("the board as the binary left it passes");
    let mutations: Vec<(&str, &str, Mutation)> = vec![
        (
            "a running task without its run (the core's invariants)",
            "invariant 1",
            Box::new(|m, s| {
                let task = s.tasks.iter_mut().find(|t| t.id == m.running).unwrap();
                task.lease = None;
            }),
        ),
        (
            "a second open run (the core's invariants)",
            "invariant 2",
            Box::new(|m, s| {
                let open = s.runs.iter().find(|r| r.task_id == m.running).unwrap();
                let id = s.runs.iter().map(|r| r.id).max().unwrap() + 1;
                s.runs.push(board_core::Run { id, ..open.clone() });
            }),
        ),
        (
            "a decomposition naming a child that does not exist",
            "which does not exist",
            Box::new(|m, s| {
                let e = events_of(s, &m.root, "decomposed").pop().unwrap();
                e.payload["child_ids"]
                    .as_array_mut()
                    .unwrap()
                    .push("t_0000beef".into());
            }),
        ),
        (
            "a decomposition whose payload is not a list of ids",
            "decomposed event",
            Box::new(|m, s| {
                let e = events_of(s, &m.root, "decomposed").pop().unwrap();
                e.payload["child_ids"] = "everything".into();
            }),
        ),
        (
            "a decomposed child that does not hold its root back",
            "without the link",
            Box::new(|m, s| {
                s.links
                    .retain(|l| !(l.parent_id == m.first && l.child_id == m.root));
            }),
        ),
        (
            "a task without a single event",
            "has no event at all",
            Box::new(|m, s| drop_events(s, &m.ready, None)),
        ),
        (
            "a task whose first event is not `created`",
            "first event is",
            Box::new(|m, s| drop_events(s, &m.done, Some("created"))),
        ),
        (
            "children of a decomposition with no `decomposed` event",
            "has no `decomposed` event naming it",
            Box::new(|m, s| drop_events(s, &m.root, Some("decomposed"))),
        ),
        (
            "a child claiming another root",
            "has no `decomposed` event naming it",
            Box::new(|m, s| {
                let e = events_of(s, &m.first, "created").pop().unwrap();
                e.payload["decomposed_from"] = m.ready.as_str().into();
            }),
        ),
        (
            "a child missing the sibling link it was created with",
            "lacks its sibling link",
            Box::new(|m, s| {
                s.links
                    .retain(|l| !(l.parent_id == m.first && l.child_id == m.second));
            }),
        ),
        (
            "a card decomposed twice",
            "decomposed twice",
            Box::new(|m, s| {
                let e = events_of(s, &m.root, "decomposed").pop().unwrap().clone();
                append(s, e);
            }),
        ),
        (
            "a done task that was never completed",
            "done without a `completed` event",
            Box::new(|m, s| set_status(s, &m.ready, Status::Done)),
        ),
        (
            "an archived task that was never archived",
            "archived without an `archived` event",
            Box::new(|m, s| set_status(s, &m.ready, Status::Archived)),
        ),
        (
            "an event naming a run that does not exist",
            "names missing run",
            Box::new(|m, s| {
                let e = events_of(s, &m.done, "completed").pop().unwrap();
                e.run_id = Some(999);
            }),
        ),
        (
            "a claim that names no run",
            "names no run",
            Box::new(|m, s| {
                let e = events_of(s, &m.running, "claimed").pop().unwrap();
                e.run_id = None;
            }),
        ),
        (
            "a run no claim opened",
            "has no `claimed` event",
            Box::new(|m, s| drop_events(s, &m.running, Some("claimed"))),
        ),
        (
            "a run that ended without an event",
            "without an event",
            Box::new(|m, s| drop_events(s, &m.reclaimed, Some("reclaimed"))),
        ),
    ];
    for (what, expected, mutate) in &mutations {
        let mut broken = m.snapshot.clone();
        mutate(&m, &mut broken);
        assert_ne!(broken, m.snapshot, "{what}: the mutation changed nothing");
        match check_board(&broken) {
            Ok(()) => panic!("check_board passed {what}"),
            Err(message) => assert!(
                message.contains(expected),
                "{what}: caught for another reason ({message}), expected {expected:?}"
            ),
        }
    }
    eprintln!("{} broken boards rejected, each by its rule", mutations.len());
}
