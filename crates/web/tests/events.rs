//! `GET /api/events`: Server-Sent Events with the event row id as `id:` and the
//! `kanban events --json` object as `data:`, resumable with `Last-Event-ID`.

mod common;

use std::time::Duration;

use board_core::shapes::event_json;
use board_core::{EventFilter, Store};
use common::{serve, Served, NOW};
use serde_json::Value;

/// Reads the stream until `n` events arrived, within a bounded time.
async fn read_events(mut r: reqwest::Response, n: usize) -> Vec<(i64, Value)> {
    let mut text = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while events.len() < n {
        let chunk = tokio::time::timeout_at(deadline, r.chunk())
            .await
            .unwrap_or_else(|_| panic!("only {} of {n} events within 10 s: {text}", events.len()))
            .expect("the stream")
            .expect("the stream ended early");
        text.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::to_owned)
            };
            if let (Some(id), Some(data)) = (field("id:"), field("data:")) {
                events.push((
                    id.trim().parse().unwrap(),
                    serde_json::from_str(data.trim()).unwrap(),
                ));
            }
        }
    }
    events
}

async fn open(s: &Served, path: &str, last: Option<i64>) -> reqwest::Response {
    let mut request = s.client.get(s.url(path)).timeout(Duration::from_secs(30));
    if let Some(id) = last {
        request = request.header("Last-Event-ID", id.to_string());
    }
    let r = request.send().await.expect("send");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn events_stream_with_row_ids_and_resume_after_the_last_seen() {
    let s = serve().await;
    let a = s.task("a");
    s.store.comment(&a.id, None, "one", None, NOW).unwrap();
    let all = s.store.events(&EventFilter::default()).unwrap();
    assert_eq!(all.len(), 2);

    let got = read_events(open(&s, "/api/events", None).await, 2).await;
    let expect: Vec<(i64, Value)> = all.iter().map(|e| (e.id, event_json(e))).collect();
    assert_eq!(got, expect);

    // A reconnect names the last id it saw and gets what came after, including what was
    // appended while it was away.
    let r = open(&s, "/api/events", Some(all[0].id)).await;
    let b = s.task("b");
    let got = read_events(r, 2).await;
    assert_eq!(got[0].0, all[1].id);
    assert_eq!(got[1].1["task_id"], serde_json::json!(b.id));
    assert_eq!(got[1].1["kind"], "created");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_change_arrives_and_a_task_filter_holds() {
    let s = serve().await;
    let a = s.task("a");
    let b = s.task("b");
    let r = open(&s, &format!("/api/events?task={}", b.id), None).await;
    s.store.archive(&a.id, NOW).unwrap();
    s.store.archive(&b.id, NOW).unwrap();
    let got = read_events(r, 2).await;
    assert!(
        got.iter().all(|(_, e)| e["task_id"] == serde_json::json!(b.id)),
        "{got:?}"
    );
    assert_eq!(got[1].1["kind"], "archived");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_resume_points_are_json_errors() {
    let s = serve().await;
    let r = s
        .client
        .get(s.url("/api/events"))
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    common::error(&r.json().await.unwrap());
    let (status, body) = s.get("/api/events?after=x").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.get("/api/events?task=t_00000000").await;
    assert_eq!(status, 404, "{body}");
}
