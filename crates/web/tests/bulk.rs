//! `POST /api/bulk`: one action on many cards, each the board's own call, a refusal per
//! card reported while the rest go on; bad requests refused whole.

mod common;

use board_core::{BoardReads, BoardWrites, NewTask, Status};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn bulk_actions_act_on_fifty_cards_and_report_each_refusal() {
    let s = common::serve().await;
    let ids: Vec<String> = (0..50)
        .map(|n| s.task(&format!("card {n}")).id.to_string())
        .collect();
    let status = |id: &str| s.store.get(&id.parse().unwrap()).unwrap().status;

    let (code, answer) = s
        .post(
            "/api/bulk",
            json!({"ids": ids, "action": "assign", "assignee": "coder"}),
        )
        .await;
    assert_eq!((code, answer["done"].clone()), (200, json!(50)), "{answer}");
    assert!(ids
        .iter()
        .all(|id| s.store.get(&id.parse().unwrap()).unwrap().assignee.as_deref() == Some("coder")));

    let (_, answer) = s
        .post(
            "/api/bulk",
            json!({"ids": ids[..10], "action": "block", "reason": "waits"}),
        )
        .await;
    assert_eq!(answer["done"], 10, "{answer}");
    assert!(ids[..10].iter().all(|id| status(id) == Status::Blocked));
    // Unblocking all fifty: the forty that were never blocked are refused, each named.
    let (code, answer) = s
        .post("/api/bulk", json!({"ids": ids, "action": "unblock"}))
        .await;
    assert_eq!((code, answer["done"].clone()), (200, json!(10)), "{answer}");
    let refused = answer["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 40);
    assert_eq!(refused[0]["task_id"], json!(ids[10]));
    assert!(
        refused[0]["error"].as_str().unwrap().contains("unblock"),
        "{answer}"
    );

    let parent = ids[0].parse().unwrap();
    let waiting = s
        .store
        .create(
            &NewTask {
                parents: vec![parent],
                ..NewTask::titled("child")
            },
            common::NOW,
        )
        .unwrap();
    let held = s.task("held");
    s.store
        .block(&held.id, None, Some("held".into()), None, common::NOW)
        .unwrap();
    let (_, answer) = s
        .post(
            "/api/bulk",
            json!({"ids": [waiting.id, held.id], "action": "promote", "reason": "go"}),
        )
        .await;
    assert_eq!(answer["done"], 1, "{answer}");
    assert_eq!(
        answer["refused"][0]["task_id"],
        json!(waiting.id),
        "an open parent refuses: {answer}"
    );
    assert_eq!(s.store.get(&held.id).unwrap().status, Status::Ready);

    let (_, answer) = s
        .post("/api/bulk", json!({"ids": ids, "action": "archive"}))
        .await;
    assert_eq!(answer["done"], 50, "{answer}");
    assert!(ids.iter().all(|id| status(id) == Status::Archived));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_bulk_requests_are_refused_whole() {
    let s = common::serve().await;
    let id = s.task("one").id.to_string();
    let many: Vec<String> = (0..501).map(|_| id.clone()).collect();
    for (body, said) in [
        (json!({"ids": [], "action": "archive"}), "send 1 to 500 task ids"),
        (
            json!({"ids": many, "action": "archive"}),
            "send 1 to 500 task ids",
        ),
        (json!({"ids": [id, "nope"], "action": "archive"}), "task id"),
        (json!({"ids": [id], "action": "explode"}), "unknown variant"),
        (
            json!({"ids": [id], "action": "assign", "assignee": ""}),
            "cannot be empty",
        ),
        (
            json!({"ids": [id], "action": "archive", "extra": 1}),
            "unknown field",
        ),
    ] {
        let (code, answer) = s.post("/api/bulk", body.clone()).await;
        assert!(code == 400 || code == 422, "{body}: {code} {answer}");
        assert!(common::error(&answer).contains(said), "{body}: {answer}");
    }
    assert_eq!(
        s.store.get(&id.parse().unwrap()).unwrap().status,
        Status::Ready,
        "nothing changed"
    );
}
