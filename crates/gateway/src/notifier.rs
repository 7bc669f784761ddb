//! The gateway's notifier (docs/gateway.md#notifications): each subscription's events, in
//! order, as signed JSON POSTs to its webhook, on its own task so no delivery holds a tick
//! back. A delivery goes out until its receiver answers 2xx (at least once; the
//! `X-Kanban-Delivery` key names the subscription and the event, the same on every
//! retry); a failure waits 2, 4, 8, ... seconds (at most an hour) and the eighth in a row
//! pauses the subscription. An event is considered once it is `SETTLE_SECONDS` old, so one
//! whose transaction committed after a later one is never passed over. The body carries the
//! event and its task's id, title and status: never a key, a password or a token.

use std::sync::Arc;
use std::time::Duration;

use board_core::notify::{Delivery, Subscription};
use board_core::{Event, EventFilter, Store, Timestamp};
use hmac::{KeyInit, Mac};
use serde_json::json;

/// Events younger than this are left for the next round.
pub const SETTLE_SECONDS: i64 = 2;
/// Events read at once while looking for the next one a subscription hears.
const WINDOW: usize = 500;
/// Deliveries to one subscription in one round.
const PER_ROUND: usize = 100;
/// How often the notifier looks for work.
const ROUND: Duration = Duration::from_secs(1);

/// What the notifier is started with.
#[derive(Clone, Debug)]
pub struct NotifySettings {
    /// How long a webhook has to answer (`gateway.notify_timeout_seconds`).
    pub timeout: Duration,
}

/// Starts the notifier on `runtime`; it runs until its handle is aborted (its board
/// stops being served) or the runtime ends.
pub fn start(
    runtime: &tokio::runtime::Runtime,
    store: Arc<dyn Store>,
    settings: NotifySettings,
) -> Option<tokio::task::JoinHandle<()>> {
    let client = match reqwest::Client::builder()
        .timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("kanban/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the notifier; no webhook is called");
            return None;
        }
    };
    Some(runtime.spawn(async move {
        loop {
            round(&store, &client).await;
            tokio::time::sleep(ROUND).await;
        }
    }))
}

/// One round: every subscription that is due, side by side.
async fn round(store: &Arc<dyn Store>, client: &reqwest::Client) {
    let listed = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || store.subscriptions()).await
    };
    let subs = match listed {
        Ok(Ok(subs)) => subs,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot read the subscriptions");
            return;
        }
        Err(_) => return,
    };
    let now = board_home::now();
    let mut running = tokio::task::JoinSet::new();
    for sub in subs.into_iter().filter(|s| due(s, now)) {
        running.spawn(serve(store.clone(), client.clone(), sub));
    }
    while running.join_next().await.is_some() {}
}

/// Whether a subscription may be served at `now`: not paused, its backoff over.
pub fn due(sub: &Subscription, now: Timestamp) -> bool {
    !sub.paused && sub.next_attempt_at.is_none_or(|at| at <= now)
}

/// What a subscription has next.
enum Next {
    /// An event it hears, with its task.
    Send(Box<(Event, Option<board_core::Task>)>),
    /// None it hears up to this settled event.
    Pass(i64),
    /// Nothing settled yet.
    Wait,
}

/// Delivers a subscription's events one by one until one fails or none is left.
async fn serve(store: Arc<dyn Store>, client: reqwest::Client, mut sub: Subscription) {
    for _ in 0..PER_ROUND {
        let next = {
            let (store, sub) = (store.clone(), sub.clone());
            tokio::task::spawn_blocking(move || next(&*store, &sub, board_home::now())).await
        };
        let delivery = match next {
            Ok(Ok(Next::Send(sent))) => post(&client, &sub, &sent.0, sent.1.as_ref()).await,
            Ok(Ok(Next::Pass(upto))) => Delivery::Passed { upto },
            Ok(Ok(Next::Wait)) => return,
            Ok(Err(e)) => {
                tracing::warn!(subscription = sub.id, error = %e, "cannot read the events to deliver");
                return;
            }
            Err(_) => return,
        };
        let failed = matches!(delivery, Delivery::Failed { .. });
        let recorded = {
            let (store, from, delivery) = (store.clone(), sub.after_event, delivery.clone());
            tokio::task::spawn_blocking(move || {
                store.record_delivery(sub.id, from, &delivery, board_home::now())
            })
            .await
        };
        match (recorded, &delivery) {
            (Ok(Ok(true)), Delivery::Delivered { event, .. } | Delivery::Passed { upto: event }) => {
                sub.after_event = *event
            }
            (Ok(Ok(true)), _) if failed => {
                tracing::warn!(subscription = sub.id, status = ?delivery, "a webhook delivery failed; it is retried");
                return;
            }
            _ => return,
        }
    }
}

/// The first event after the subscription's cursor that it hears, or how far it may pass.
fn next(store: &dyn Store, sub: &Subscription, now: Timestamp) -> board_core::StoreResult<Next> {
    let events = store.events(&EventFilter {
        task_id: sub.task_id.clone(),
        after_id: sub.after_event,
        limit: Some(WINDOW),
        ..EventFilter::default()
    })?;
    let settled = events.iter().take_while(|e| e.created_at <= now - SETTLE_SECONDS);
    let mut last = None;
    for event in settled {
        if sub.kinds.iter().any(|k| k == &event.kind) {
            let task = store.get(&event.task_id).ok();
            return Ok(Next::Send(Box::new((event.clone(), task))));
        }
        last = Some(event.id);
    }
    Ok(last.map_or(Next::Wait, Next::Pass))
}

/// The delivery key of `event` for subscription `sub`: the same on every retry.
pub fn delivery_key(sub: &Subscription, event: &Event) -> String {
    format!("sub-{}-event-{}", sub.id, event.id)
}

/// The JSON body of a delivery.
pub fn body(sub: &Subscription, event: &Event, task: Option<&board_core::Task>) -> Vec<u8> {
    let doc = json!({
        "delivery": delivery_key(sub, event),
        "subscription": sub.id,
        "event": {
            "id": event.id,
            "task_id": event.task_id,
            "run_id": event.run_id,
            "kind": event.kind,
            "payload": event.payload,
            "created_at": event.created_at,
        },
        "task": task.map(|t| json!({
            "id": t.id,
            "title": t.title,
            "status": t.status,
            "assignee": t.assignee,
        })),
    });
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// `sha256=` and the lowercase hex HMAC-SHA256 of `body` under `secret`, as GitHub's
/// `X-Hub-Signature-256` is.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // HMAC takes a key of any length; were one refused, the empty signature fails every
    // receiver's check rather than the notifier.
    let Ok(mut mac) = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Posts one event; how it went, in words that name no URL.
async fn post(
    client: &reqwest::Client,
    sub: &Subscription,
    event: &Event,
    task: Option<&board_core::Task>,
) -> Delivery {
    let body = body(sub, event, task);
    let sent = client
        .post(&sub.url)
        .header("content-type", "application/json")
        .header("x-kanban-delivery", delivery_key(sub, event))
        .header("x-kanban-event", event.kind.as_str())
        .header("x-kanban-signature", signature(&sub.secret, &body))
        .body(body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => Delivery::Delivered {
            event: event.id,
            status: r.status().as_u16().to_string(),
        },
        Ok(r) => Delivery::Failed {
            status: format!("HTTP {}", r.status().as_u16()),
        },
        Err(e) if e.is_timeout() => Delivery::Failed {
            status: "timed out".into(),
        },
        Err(e) if e.is_connect() => Delivery::Failed {
            status: "cannot connect".into(),
        },
        Err(_) => Delivery::Failed {
            status: "the request failed".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subscription to `completed` events, active, at the start of the events.
    fn subscription(id: i64, task_id: Option<board_core::TaskId>) -> Subscription {
        Subscription {
            id,
            task_id,
            kinds: vec!["completed".into()],
            url: "http://127.0.0.1:9/".into(),
            secret: "0123456789abcdef".into(),
            created_at: 0,
            after_event: 0,
            failures: 0,
            next_attempt_at: None,
            paused: false,
            last_status: None,
            last_attempt_at: None,
        }
    }

    #[test]
    fn a_paused_subscription_or_one_backing_off_is_not_due() {
        let sub = subscription(1, None);
        assert!(due(&sub, 100));
        let backing_off = Subscription {
            next_attempt_at: Some(101),
            ..sub.clone()
        };
        assert!(!due(&backing_off, 100) && due(&backing_off, 101));
        assert!(!due(&Subscription { paused: true, ..sub }, 100));
    }

    #[test]
    fn a_delivery_names_its_event_and_task_and_never_the_key() {
        let sub = Subscription {
            secret: "the-signing-key-of-the-hook".into(),
            ..subscription(3, None)
        };
        let task = board_core::graph::blank_task(
            "t_0a0b0c0d".parse().unwrap(),
            "ship it".into(),
            board_core::Status::Done,
            5,
        );
        let event = Event {
            id: 42,
            task_id: task.id.clone(),
            run_id: Some(7),
            kind: "completed".into(),
            payload: json!({ "summary": "shipped" }),
            created_at: 9,
        };
        assert_eq!(delivery_key(&sub, &event), "sub-3-event-42");
        let sent: serde_json::Value = serde_json::from_slice(&body(&sub, &event, Some(&task))).unwrap();
        assert_eq!(
            sent,
            json!({
                "delivery": "sub-3-event-42",
                "subscription": 3,
                "event": { "id": 42, "task_id": "t_0a0b0c0d", "run_id": 7, "kind": "completed",
                           "payload": { "summary": "shipped" }, "created_at": 9 },
                "task": { "id": "t_0a0b0c0d", "title": "ship it", "status": "done", "assignee": null },
            })
        );
        assert!(!String::from_utf8(body(&sub, &event, None))
            .unwrap()
            .contains("signing-key"));
    }

    #[test]
    fn the_next_event_is_the_first_settled_one_it_hears_after_its_cursor() {
        use board_core::memory::MemStore;
        use board_core::{BoardWrites, NewTask};
        let store = MemStore::new();
        let t0 = 1_800_000_000;
        let watched = store.create(&NewTask::titled("watched"), t0).unwrap();
        let other = store.create(&NewTask::titled("other"), t0).unwrap();
        for id in [&other.id, &watched.id] {
            let claim = store.claim(id, 60, t0).unwrap();
            let done = board_core::Completion {
                expected_run_id: Some(claim.run_id),
                ..board_core::Completion::default()
            };
            store.complete(id, &done, t0).unwrap();
        }
        let sub = subscription(1, Some(watched.id.clone()));
        assert!(
            matches!(next(&store, &sub, t0 + 1), Ok(Next::Wait)),
            "not settled yet"
        );
        let Ok(Next::Send(sent)) = next(&store, &sub, t0 + SETTLE_SECONDS) else {
            panic!("the watched task's completion")
        };
        assert_eq!(
            (sent.0.task_id.clone(), sent.0.kind.as_str()),
            (watched.id.clone(), "completed")
        );
        let past = Subscription {
            after_event: sent.0.id,
            ..sub.clone()
        };
        assert!(
            matches!(next(&store, &past, t0 + 10), Ok(Next::Wait)),
            "nothing after it"
        );
        let unheard = Subscription {
            kinds: vec!["blocked".into()],
            ..sub
        };
        let Ok(Next::Pass(upto)) = next(&store, &unheard, t0 + 10) else {
            panic!("passes what it does not hear")
        };
        assert_eq!(upto, sent.0.id);
    }

    #[test]
    fn signatures_are_hmac_sha256_as_rfc_4231_says() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
