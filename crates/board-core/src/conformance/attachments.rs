//! Files on cards: attached with the name the board makes of the caller's (one per card),
//! read back byte for byte with their digest, removed with an event, and gone with their
//! task when it is removed.

use super::{assert_board_ok, ready_task, Backend, T0};
use crate::attachments::{digest, NewAttachment};
use crate::store::StoreError;
use crate::types::TaskId;
use crate::{EventFilter, Refusal};

fn file(name: &str, content: &[u8]) -> NewAttachment {
    NewAttachment {
        name: name.into(),
        content_type: Some("application/octet-stream".into()),
        created_by: Some("ana".into()),
        content: content.to_vec(),
    }
}

fn refused<T: std::fmt::Debug>(result: Result<T, StoreError>) -> Refusal {
    match result {
        Err(StoreError::Refused(r)) => r,
        other => panic!("not refused: {other:?}"),
    }
}

pub fn files_round_trip_under_names_the_board_makes(board: &dyn Backend) {
    let s = board.connect();
    let task = ready_task(&*s, "with files");
    let unknown: TaskId = "t_00000000".parse().unwrap();
    assert_eq!(
        refused(s.attach(&unknown, &file("a.txt", b"x"), T0)),
        Refusal::NoSuchTask(unknown.clone())
    );
    assert_eq!(refused(s.attachments(&unknown)), Refusal::NoSuchTask(unknown));
    let bytes: Vec<u8> = (0..=255).collect();
    let first = s
        .attach(&task.id, &file("../../etc/notes.txt", &bytes), T0 + 1)
        .unwrap();
    let second = s.attach(&task.id, &file("notes.txt", b""), T0 + 2).unwrap();
    assert_eq!(
        (first.name.as_str(), second.name.as_str()),
        ("notes.txt", "notes (1).txt")
    );
    assert_eq!(
        (first.size, first.sha256.as_str()),
        (256, digest(&bytes).as_str())
    );
    assert_eq!(
        (first.created_by.as_deref(), first.created_at),
        (Some("ana"), T0 + 1)
    );
    assert_eq!(
        s.attachments(&task.id).unwrap(),
        vec![first.clone(), second.clone()]
    );
    assert_eq!(s.attachment(first.id).unwrap(), (first.clone(), bytes));
    assert_eq!(s.attachment(second.id).unwrap().1, Vec::<u8>::new());

    let before = s.snapshot().unwrap();
    for bad in [
        NewAttachment {
            content_type: Some("not a type".into()),
            ..file("b.txt", b"x")
        },
        file("...", b"x"),
    ] {
        assert!(matches!(
            refused(s.attach(&task.id, &bad, T0 + 3)),
            Refusal::Invalid(_)
        ));
    }
    assert_eq!(s.snapshot().unwrap(), before, "a refusal writes nothing");

    assert_eq!(s.detach(first.id, T0 + 4).unwrap(), first);
    assert_eq!(
        refused(s.detach(first.id, T0 + 5)),
        Refusal::NoSuchAttachment(first.id)
    );
    assert_eq!(
        refused(s.attachment(first.id)),
        Refusal::NoSuchAttachment(first.id)
    );
    assert_eq!(s.attachments(&task.id).unwrap(), vec![second.clone()]);
    let events = s
        .events(&EventFilter {
            task_id: Some(task.id.clone()),
            kinds: vec!["attached".into(), "detached".into()],
            ..EventFilter::default()
        })
        .unwrap();
    let kinds: Vec<(&str, &serde_json::Value)> = events
        .iter()
        .map(|e| (e.kind.as_str(), &e.payload["name"]))
        .collect();
    assert_eq!(
        kinds,
        [
            ("attached", &serde_json::json!("notes.txt")),
            ("attached", &serde_json::json!("notes (1).txt")),
            ("detached", &serde_json::json!("notes.txt")),
        ]
    );
    // A name freed is free again; a removed task takes its files with it.
    assert_eq!(
        s.attach(&task.id, &file("notes.txt", b"y"), T0 + 6).unwrap().name,
        "notes.txt"
    );
    s.archive(&task.id, T0 + 7).unwrap();
    s.remove_archived(&task.id).unwrap();
    assert_eq!(
        refused(s.attachment(second.id)),
        Refusal::NoSuchAttachment(second.id)
    );
    assert_board_ok(&*s);
}
