//! The web board shows lanes (docs/lanes.md): the stats page lists each lane with its
//! state and counts, a card held by a lane names it, and a task's runs say which lane
//! held each one; a ready card of a profile the home cannot run says it waits.

mod common;

use board_core::lanes::{Lane, LaneClaim};
use board_core::{BoardWrites, Checks, LaneDesk, NewTask};
use common::{clock, serve};

#[tokio::test(flavor = "multi_thread")]
async fn lanes_show_on_the_stats_page_their_cards_and_their_runs() {
    let s = serve().await;
    let stats = s.text("/stats").await;
    assert!(stats.contains("No lanes"), "{stats}");

    let now = clock();
    let lane = Lane::new(
        "night-shift",
        &["ext".to_owned()],
        &format!("kl_{}", "1".repeat(64)),
        now,
    )
    .unwrap();
    s.store.create_lane(&lane).unwrap();
    let idle = Lane::new(
        "<b>idle</b>",
        &["ext".to_owned()],
        &format!("kl_{}", "2".repeat(64)),
        now,
    );
    assert!(idle.is_err(), "a lane's name is a plain word");
    let done = s
        .store
        .create(
            &NewTask {
                assignee: Some("ext".into()),
                ..NewTask::titled("first")
            },
            now,
        )
        .unwrap();
    let held = s
        .store
        .create(
            &NewTask {
                assignee: Some("ext".into()),
                ..NewTask::titled("second")
            },
            now,
        )
        .unwrap();
    let claim = |s: &common::Served| match s
        .store
        .claim_for_lane("night-shift", 600, 4, &|_| Checks::default(), clock())
        .unwrap()
    {
        LaneClaim::Claimed(c) => c,
        LaneClaim::Nothing => panic!("a ready task"),
    };
    let first = claim(&s);
    assert_eq!(first.task.id, done.id);
    s.store
        .complete(
            &done.id,
            &board_core::Completion {
                expected_run_id: Some(first.run_id),
                ..Default::default()
            },
            clock(),
        )
        .unwrap();
    let second = claim(&s);
    assert_eq!(second.task.id, held.id);

    let stats = s.text("/stats").await;
    let row = stats
        .split("<tr>")
        .find(|r| r.contains("night-shift"))
        .unwrap_or_else(|| panic!("a row for the lane: {stats}"));
    assert!(
        row.contains("<td>holding</td><td>1</td><td>1</td><td>0</td>"),
        "holding one, one done, none failed: {row}"
    );
    assert!(row.contains("<td>ext</td>"), "{row}");

    let (status, card) = s.get(&format!("/api/cards/{}", held.id)).await;
    assert_eq!(
        (status, card["lane"].as_str()),
        (200, Some("night-shift")),
        "{card}"
    );
    let (_, card) = s.get(&format!("/api/cards/{}", done.id)).await;
    assert!(card["lane"].is_null(), "a done task is nobody's: {card}");
    let (_, shown) = s.get(&format!("/api/tasks/{}", held.id)).await;
    assert_eq!(shown["runs"][0]["lane"], "night-shift", "{shown}");
    let page = s.text(&format!("/tasks/{}", done.id)).await;
    assert!(
        page.contains("<td>lane night-shift</td>"),
        "the run's holder: {page}"
    );
}

/// A ready card assigned to a profile this home cannot run says so; a card of a runnable
/// profile, or of a server that does not know which profiles run, says nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_ready_card_of_an_unrunnable_profile_says_it_waits() {
    let settings = web::Settings {
        runnable: Some(["coder".to_owned()].into()),
        ..common::settings()
    };
    let s = common::serve_with(settings).await;
    let make = |assignee: &str| NewTask {
        assignee: Some(assignee.into()),
        ..NewTask::titled(assignee)
    };
    let stuck = s.store.create(&make("hermes-writer"), clock()).unwrap();
    let fine = s.store.create(&make("coder"), clock()).unwrap();
    let (status, card) = s.get(&format!("/api/cards/{}", stuck.id)).await;
    assert_eq!((status, &card["unrunnable"]), (200, &"hermes-writer".into()));
    let (_, card) = s.get(&format!("/api/cards/{}", fine.id)).await;
    assert!(card["unrunnable"].is_null(), "{card}");
    let (_, cards) = s.get("/api/cards?status=ready").await;
    let marked: Vec<&serde_json::Value> = cards["cards"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["unrunnable"].is_null())
        .collect();
    assert_eq!(marked.len(), 1, "{cards}");
    let unknown = serve().await;
    let task = unknown.store.create(&make("hermes-writer"), clock()).unwrap();
    let (_, card) = unknown.get(&format!("/api/cards/{}", task.id)).await;
    assert!(card["unrunnable"].is_null(), "{card}");
}
