//! `GET /api/events`: Server-Sent Events with the event row id as `id:` and the
//! `kanban events --json` object as `data:`, resumable with `Last-Event-ID`.

mod common;

use std::time::Duration;

use board_core::shapes::event_json;
use board_core::{BoardReads, BoardWrites, EventFilter};
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

/// A board with five events: two tasks, each commented, and one archived.
fn five_events(s: &Served) -> Vec<i64> {
    let a = s.task("a");
    s.store.comment(&a.id, None, "one", None, NOW).unwrap();
    let b = s.task("b");
    s.store.comment(&b.id, None, "two", None, NOW).unwrap();
    s.store.archive(&a.id, NOW).unwrap();
    let ids: Vec<i64> = s
        .store
        .events(&EventFilter::default())
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids.len(), 5, "{ids:?}");
    ids
}

/// The ids of the events a stream opened with `path` and `last` sends first: `n` of them,
/// the last of which is appended after it opened.
async fn resumed(s: &Served, path: &str, last: Option<i64>, n: usize) -> Vec<i64> {
    let r = open(s, path, last).await;
    s.task("after the stream opened");
    read_events(r, n).await.into_iter().map(|(id, _)| id).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn after_and_last_event_id_each_resume_at_the_next_event() {
    let s = serve().await;
    let ids = five_events(&s);
    let at = ids[2];
    let by_query = resumed(&s, &format!("/api/events?after={at}"), None, 3).await;
    assert_eq!(by_query, [ids[3], ids[4], ids[4] + 1], "?after={at}");
    let by_header = resumed(&s, "/api/events", Some(at), 4).await;
    assert_eq!(
        by_header,
        [ids[3], ids[4], ids[4] + 1, ids[4] + 2],
        "Last-Event-ID: {at}"
    );
    // A browser that reconnects keeps the page's ?after= and names the last event it saw.
    let both = resumed(&s, &format!("/api/events?after={}", ids[0]), Some(at), 2).await;
    assert_eq!(both[0], ids[3], "Last-Event-ID wins over ?after=");
    let from_zero = resumed(&s, "/api/events?after=0", None, 1).await;
    assert_eq!(from_zero, [ids[0]], "after=0 starts at the first event");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_point_past_the_end_sends_the_next_new_event_and_nothing_old() {
    let s = serve().await;
    five_events(&s);
    let newest = || {
        s.store
            .events(&EventFilter::default())
            .unwrap()
            .last()
            .unwrap()
            .id
    };
    for past in [|n| n + 1, |n| n + 1000, |_| i64::MAX] {
        let n = newest();
        let id = past(n);
        let by_query = resumed(&s, &format!("/api/events?after={id}"), None, 1).await;
        assert_eq!(by_query, [n + 1], "?after={id} on a board whose newest is {n}");
        let n = newest();
        let id = past(n);
        let by_header = resumed(&s, "/api/events", Some(id), 1).await;
        assert_eq!(
            by_header,
            [n + 1],
            "Last-Event-ID: {id} on a board whose newest is {n}"
        );
    }
}

/// The message of a refused stream request; a stream opened instead is a failure.
async fn refusal(request: reqwest::RequestBuilder, what: &str) -> String {
    let r = request.send().await.expect("send");
    let status = r.status().as_u16();
    assert_eq!(status, 400, "{what} was answered {status}, not refused");
    common::error(&r.json().await.expect("a JSON error")).to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_malformed_resume_point_is_a_clear_error() {
    let s = serve().await;
    five_events(&s);
    let huge = "99999999999999999999";
    for bad in ["x", "-1", huge, "", "1.5", "+3", "0x10", "3 4"] {
        let query = bad.replace('+', "%2B").replace(' ', "%20");
        let by_query = s.client.get(s.url(&format!("/api/events?after={query}")));
        let message = refusal(by_query, &format!("?after={bad}")).await;
        assert!(message.starts_with("?after= is not an event id"), "{message}");
        let by_header = s.client.get(s.url("/api/events")).header("Last-Event-ID", bad);
        let message = refusal(by_header, &format!("Last-Event-ID: {bad:?}")).await;
        assert!(
            message.starts_with("Last-Event-ID is not an event id"),
            "{message}"
        );
    }
}

/// With a poll interval of a minute, an event reaches an open stream at once when the
/// board's wake-up is heard (as `kanban serve` hears a `kanban create`), and not before.
#[tokio::test(flavor = "multi_thread")]
async fn a_wake_up_sends_new_events_without_waiting_for_the_poll() {
    let (wake, wakes) = tokio::sync::watch::channel(0u64);
    let lanes = web::LaneSettings {
        max_held: 1,
        lease_seconds: 60,
        max_wait_seconds: 1,
        max_waiting: 1,
        checks: std::sync::Arc::new(|_| board_core::Checks::default()),
        brief: std::sync::Arc::new(|_, _, _| Ok(Value::Null)),
        wakes,
    };
    let s = common::serve_with(web::Settings {
        poll_interval: Duration::from_secs(60),
        lanes: Some(lanes),
        ..common::settings()
    })
    .await;
    let mut r = open(&s, "/api/events?after=0", None).await;
    let task = s.task("written while a page is open");
    let quiet = tokio::time::timeout(Duration::from_millis(700), r.chunk()).await;
    assert!(
        quiet.is_err(),
        "an event before the wake-up: the poll is a minute: {quiet:?}"
    );
    let woke = std::time::Instant::now();
    wake.send_modify(|n| *n += 1);
    let got = read_events(r, 1).await;
    assert_eq!(got[0].1["task_id"], serde_json::json!(task.id));
    assert!(woke.elapsed() < Duration::from_secs(2), "{:?}", woke.elapsed());
}
