//! Importing another board's tasks with their ids kept: history comes along under fresh
//! run ids, links go through `link`'s rules, and a second import changes nothing.

use serde_json::json;

use super::{assert_board_ok, event_kinds, Backend, T0};
use crate::graph::blank_task;
use crate::import::{ImportBatch, ImportedTask, Landed, LinkLanded};
use crate::types::{Comment, Event, Link, Outcome, Run, RunStatus, Status, TaskId};
use crate::{NewTask, Refusal};

fn id(n: u8) -> TaskId {
    TaskId::from_random([0xa0, 0, 0, n])
}

fn bundle(n: u8, status: Status) -> ImportedTask {
    ImportedTask {
        task: blank_task(id(n), format!("imported {n}"), status, T0 - 1000),
        runs: Vec::new(),
        events: Vec::new(),
        comments: Vec::new(),
        note: json!({ "from": "elsewhere" }),
    }
}

fn run(task: &TaskId, source_id: i64, outcome: Outcome) -> Run {
    Run {
        id: source_id,
        task_id: task.clone(),
        profile: Some("coder".into()),
        status: RunStatus::Ended,
        outcome: Some(outcome),
        claim_lock: None,
        claim_expires: None,
        worker_pid: None,
        worker_host: None,
        last_heartbeat_at: None,
        started_at: T0 - 900,
        ended_at: Some(T0 - 800),
        summary: Some(format!("attempt {source_id}")),
        error: None,
        metadata: None,
        kind: crate::RunKind::Work,
        checks: crate::Checks::default(),
        evidence: None,
        lane: None,
    }
}

fn event(task: &TaskId, kind: &str, run_id: Option<i64>) -> Event {
    Event {
        id: 0,
        task_id: task.clone(),
        run_id,
        kind: kind.into(),
        payload: json!({ "source": kind }),
        created_at: T0 - 700,
    }
}

/// A done task with two runs, events and a comment; a ready parent-less task; a ready
/// child of an open parent; a task colliding with ours; one whose idempotency key is
/// ours; a running one (refused).
fn batch(ours: &TaskId) -> ImportBatch {
    let mut done = bundle(1, Status::Done);
    let a = done.task.id.clone();
    done.runs = vec![run(&a, 40, Outcome::Crashed), run(&a, 41, Outcome::Completed)];
    done.events = vec![event(&a, "created", None), event(&a, "completed", Some(41))];
    done.comments = vec![Comment {
        id: 9,
        task_id: a.clone(),
        author: Some("ana".into()),
        body: "looks right".into(),
        created_at: T0 - 600,
    }];
    let mut keyed = bundle(5, Status::Todo);
    keyed.task.idempotency_key = Some("shared-key".into());
    let mut collision = bundle(9, Status::Done);
    collision.task.id = ours.clone();
    let links = vec![
        Link {
            parent_id: id(1),
            child_id: id(2),
        },
        Link {
            parent_id: id(4),
            child_id: id(3),
        },
        Link {
            parent_id: id(3),
            child_id: id(4),
        },
        Link {
            parent_id: id(7),
            child_id: id(2),
        },
    ];
    let tasks = vec![
        done,
        bundle(2, Status::Ready),
        bundle(3, Status::Ready),
        bundle(4, Status::Todo),
        keyed,
        collision,
        bundle(6, Status::Running),
    ];
    ImportBatch { tasks, links }
}

/// Ids are kept, history follows under fresh run ids, links obey `link`, a colliding id
/// leaves ours alone, and the same batch again changes nothing.
pub fn import_keeps_ids_and_history(board: &dyn Backend) {
    let s = board.connect();
    let ours = s
        .create(
            &NewTask {
                idempotency_key: Some("shared-key".into()),
                ..NewTask::titled("ours")
            },
            T0,
        )
        .unwrap();
    let outcome = s.import(&batch(&ours.id), T0).unwrap();
    assert_eq!(
        &outcome.tasks[..6],
        &[
            Landed::Imported,
            Landed::Imported,
            Landed::Imported,
            Landed::Imported,
            Landed::ImportedWithoutKey,
            Landed::Collision,
        ]
    );
    assert!(matches!(&outcome.tasks[6], Landed::Invalid(r) if r.contains("running")));
    assert_eq!(&outcome.links[..2], &[LinkLanded::Added, LinkLanded::Added]);
    assert!(matches!(
        &outcome.links[2],
        LinkLanded::Refused(Refusal::Cycle { .. })
    ));
    assert!(matches!(
        &outcome.links[3],
        LinkLanded::Refused(Refusal::NoSuchTask(_))
    ));
    assert_board_ok(&*s);

    let a = s.get(&id(1)).unwrap();
    assert_eq!(
        (a.status, a.title.as_str(), a.created_at),
        (Status::Done, "imported 1", T0 - 1000)
    );
    let runs = s.runs(&a.id).unwrap();
    let outcomes: Vec<_> = runs.iter().map(|r| (r.outcome, r.summary.as_deref())).collect();
    assert_eq!(
        outcomes,
        [
            (Some(Outcome::Crashed), Some("attempt 40")),
            (Some(Outcome::Completed), Some("attempt 41"))
        ]
    );
    assert_eq!(event_kinds(&*s, &a.id), ["created", "completed", "imported"]);
    let events = s
        .events(&crate::EventFilter {
            task_id: Some(a.id.clone()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(events[1].run_id, Some(runs[1].id));
    assert_eq!((events[1].created_at, events[2].created_at), (T0 - 700, T0));
    assert_eq!(events[2].payload, json!({ "from": "elsewhere" }));
    let comments = s.comments(&a.id).unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!(
        (comments[0].author.as_deref(), comments[0].body.as_str()),
        (Some("ana"), "looks right")
    );
    assert_eq!(s.get(&id(2)).unwrap().status, Status::Ready, "its parent is done");
    assert_eq!(s.get(&id(3)).unwrap().status, Status::Todo, "its parent is open");
    assert_eq!(s.get(&id(5)).unwrap().idempotency_key, None);
    assert_eq!(s.get(&ours.id).unwrap(), ours, "a colliding id leaves ours alone");
    assert!(s.get(&id(6)).is_err());

    let before = s.snapshot().unwrap();
    let again = s.import(&batch(&ours.id), T0 + 5).unwrap();
    assert!(
        again.tasks[..5].iter().all(|l| *l == Landed::Present),
        "{again:?}"
    );
    assert_eq!(&again.links[..2], &[LinkLanded::Present, LinkLanded::Present]);
    assert_eq!(s.snapshot().unwrap(), before, "a second import changes nothing");
    assert_eq!(s.comments(&a.id).unwrap().len(), 1);
}
