//! Every field over the board's limits ([`crate::limits`]) is refused by the store
//! itself, whichever way it comes, and the board is left as it was: no surface (the
//! report channel, the web API, MCP, an import) can write what the core refuses.

use serde_json::json;

use super::{assert_board_ok, ready_task, Backend, T0};
use crate::graph::blank_task;
use crate::import::{ImportBatch, ImportedTask, Landed};
use crate::limits::{SHORT_MAX_BYTES, TEXT_MAX_BYTES};
use crate::store::{Completion, StoreError};
use crate::types::{Event, Status, TaskId};
use crate::{NewTask, Refusal};

fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, StoreError>) {
    match result {
        Err(StoreError::Refused(Refusal::Invalid(message))) => {
            assert!(message.contains("limit"), "{what}: {message}")
        }
        other => panic!("{what}: not refused for its size: {other:?}"),
    }
}

pub fn fields_over_the_limits_are_refused_and_change_nothing(board: &dyn Backend) {
    let s = board.connect();
    let long = "x".repeat(TEXT_MAX_BYTES + 1);
    let name = "n".repeat(SHORT_MAX_BYTES + 1);
    let t = ready_task(&*s, "capped");
    let claim = s.claim(&t.id, 900, T0).unwrap();
    let before = s.snapshot().unwrap();

    for (what, task) in [
        (
            "body",
            NewTask {
                body: long.clone(),
                ..NewTask::titled("a")
            },
        ),
        (
            "assignee",
            NewTask {
                assignee: Some(name.clone()),
                ..NewTask::titled("b")
            },
        ),
        (
            "creator",
            NewTask {
                created_by: Some(name.clone()),
                ..NewTask::titled("c")
            },
        ),
        (
            "key",
            NewTask {
                idempotency_key: Some(name.clone()),
                ..NewTask::titled("d")
            },
        ),
    ] {
        refused(what, s.create(&task, T0));
    }
    refused("comment", s.comment(&t.id, None, &long, None, T0));
    refused("author", s.comment(&t.id, Some(&name), "hello", None, T0));
    refused(
        "note",
        s.heartbeat(&t.id, claim.run_id, 900, Some(long.clone()), T0),
    );
    let metadata = json!({ "log": long });
    for (what, completion) in [
        (
            "result",
            Completion {
                result: Some(long.clone()),
                ..Default::default()
            },
        ),
        (
            "summary",
            Completion {
                summary: Some(long.clone()),
                ..Default::default()
            },
        ),
        (
            "metadata",
            Completion {
                metadata: Some(metadata),
                ..Default::default()
            },
        ),
    ] {
        let guarded = Completion {
            expected_run_id: Some(claim.run_id),
            ..completion
        };
        refused(what, s.complete(&t.id, &guarded, T0));
    }
    refused(
        "reason",
        s.block(&t.id, None, Some(long.clone()), Some(claim.run_id), T0),
    );
    refused("assign", s.assign(&t.id, Some(name.clone()), T0));
    assert_eq!(s.snapshot().unwrap(), before, "a refused write changed the board");

    // At the limits exactly, each is taken.
    let fits = NewTask {
        body: "y".repeat(TEXT_MAX_BYTES),
        assignee: Some("a".repeat(SHORT_MAX_BYTES)),
        ..NewTask::titled("at the limits")
    };
    s.create(&fits, T0).unwrap();
    s.comment(
        &t.id,
        Some(&"a".repeat(SHORT_MAX_BYTES)),
        &"c".repeat(TEXT_MAX_BYTES),
        Some(claim.run_id),
        T0,
    )
    .unwrap();

    // An import is no way around them: the task is refused whole.
    let mut incoming = ImportedTask {
        task: blank_task(
            TaskId::from_random([0xb0, 0, 0, 1]),
            "imported".into(),
            Status::Done,
            T0 - 10,
        ),
        runs: Vec::new(),
        events: Vec::new(),
        comments: Vec::new(),
        note: json!({ "from": "elsewhere" }),
    };
    incoming.events.push(Event {
        id: 0,
        task_id: incoming.task.id.clone(),
        run_id: None,
        kind: name.clone(),
        payload: json!({}),
        created_at: T0 - 10,
    });
    let outcome = s
        .import(
            &ImportBatch {
                tasks: vec![incoming.clone()],
                links: Vec::new(),
            },
            T0,
        )
        .unwrap();
    assert!(
        matches!(&outcome.tasks[0], Landed::Invalid(why) if why.contains("event's kind")),
        "{outcome:?}"
    );
    assert!(matches!(
        s.get(&incoming.task.id),
        Err(StoreError::Refused(Refusal::NoSuchTask(_)))
    ));
    assert_board_ok(&*s);
}
