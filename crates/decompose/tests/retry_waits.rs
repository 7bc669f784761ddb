//! How long `call_model` waits between retries, on tokio's paused clock (a minute of
//! waiting takes no real time): a `Retry-After` is capped, no request starts that could
//! still be out at the attempt's deadline, and a decomposition lease covers every
//! request and wait a call may make.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use board_core::memory::MemStore;
use board_core::BoardWrites;
use board_core::LlmPurpose;
use board_core::{NewTask, Store, TaskId, Timestamp};
use decompose::client::{COMMIT_MARGIN, MAX_RETRY_WAIT};
use decompose::{
    call_deadline, call_model, lease_seconds, Attempt, CallFailure, DecomposerSettings, FailureKind,
    ModelClient, ModelReply,
};
use serde_json::{json, Value};
use tokio::time::Instant;

const NOW: Timestamp = 1_700_000_000;
const TIMEOUT: Duration = Duration::from_secs(5);

/// A provider that takes `takes` to answer each request, with a 429 asking for
/// `retry_after` until its `answer_at`-th request, which it answers.
struct RateLimited {
    takes: Duration,
    retry_after: Duration,
    answer_at: usize,
    sent: AtomicUsize,
}

impl RateLimited {
    fn new(takes: Duration, retry_after: Duration, answer_at: usize) -> RateLimited {
        RateLimited {
            takes,
            retry_after,
            answer_at,
            sent: AtomicUsize::new(0),
        }
    }

    fn sent(&self) -> usize {
        self.sent.load(Ordering::SeqCst)
    }
}

impl ModelClient for RateLimited {
    async fn send(&self, _body: &Value) -> Result<ModelReply, CallFailure> {
        let n = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(self.takes).await;
        if n >= self.answer_at {
            return Ok(ModelReply {
                content: "ok".into(),
                http_status: 200,
                prompt_tokens: None,
                completion_tokens: None,
            });
        }
        Err(CallFailure {
            kind: FailureKind::HttpError,
            http_status: Some(429),
            retry_after: Some(self.retry_after),
            message: "model answered HTTP 429: slow down".into(),
        })
    }
}

fn card(store: &MemStore) -> TaskId {
    let triage = NewTask {
        triage: true,
        ..NewTask::titled("a card")
    };
    store.create(&triage, NOW).unwrap().id
}

/// Calls `client` for a fresh card with `retries` retries and the attempt's `deadline`;
/// the result and the time it took on the paused clock.
async fn call(
    client: &RateLimited,
    retries: u32,
    deadline: Option<Timestamp>,
) -> (Result<ModelReply, CallFailure>, Duration) {
    let memory = MemStore::new();
    let card = card(&memory);
    let store: Arc<dyn Store> = Arc::new(memory);
    let settings = DecomposerSettings {
        api_key_env: None,
        timeout: TIMEOUT,
        transient_retries: retries,
        ..DecomposerSettings::default()
    };
    let attempt = Attempt {
        deadline,
        ..Attempt::manual(&card)
    };
    let started = Instant::now();
    let clock = move || NOW + started.elapsed().as_secs() as Timestamp;
    let body = json!({ "model": "m", "messages": [] });
    let result = call_model(
        client,
        &(store.clone() as _),
        &attempt,
        LlmPurpose::Decompose,
        &body,
        &settings,
        &clock,
    )
    .await;
    (result, started.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_of_100000_seconds_waits_at_most_the_cap() {
    let client = RateLimited::new(Duration::ZERO, Duration::from_secs(100_000), 2);
    let (result, took) = call(&client, 1, None).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(client.sent(), 2);
    assert!(
        took >= MAX_RETRY_WAIT && took < MAX_RETRY_WAIT + Duration::from_secs(1),
        "waited {took:?}, the cap is {MAX_RETRY_WAIT:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_request_starts_that_could_outlast_the_deadline() {
    // 30 s of wait and 5 s of timeout pass a deadline 30 s away: the 429 stands.
    let long = RateLimited::new(Duration::ZERO, Duration::from_secs(30), usize::MAX);
    let (result, took) = call(&long, 2, Some(NOW + 30)).await;
    assert_eq!(long.sent(), 1, "a retry that would outlast the lease");
    let failure = result.unwrap_err();
    assert_eq!(failure.http_status, Some(429), "{failure}");
    assert!(took < Duration::from_secs(1), "waited {took:?} for nothing");
    // 10 s and 5 s fit: the retry is made.
    let short = RateLimited::new(Duration::ZERO, Duration::from_secs(10), 2);
    let (result, _) = call(&short, 2, Some(NOW + 30)).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(short.sent(), 2);
    // A first request that could be out past the deadline is not sent at all.
    let late = RateLimited::new(Duration::ZERO, Duration::ZERO, 1);
    let (result, _) = call(&late, 2, Some(NOW + 4)).await;
    assert_eq!(result.unwrap_err().kind, FailureKind::NotSent);
    assert_eq!(late.sent(), 0);
}

/// The lease is taken at the tick's time; the call reads the clock when it starts,
/// which may be a second or two later: its first request is still sent.
#[tokio::test(start_paused = true)]
async fn a_call_that_starts_seconds_after_its_lease_still_sends() {
    for retries in [0, 1] {
        for late in [1, 2] {
            let taken = NOW - late;
            let quick = RateLimited::new(Duration::ZERO, Duration::ZERO, 1);
            let deadline = call_deadline(taken + lease_seconds(TIMEOUT, retries));
            let (result, _) = call(&quick, retries, Some(deadline)).await;
            assert!(result.is_ok(), "{retries} retries, {late} s late: {result:?}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_lease_covers_every_request_and_wait_a_call_may_make() {
    for retries in [0, 1, 2, 5] {
        let lease = lease_seconds(TIMEOUT, retries);
        // Each request takes the whole timeout and asks for the longest wait.
        let worst = RateLimited::new(TIMEOUT, Duration::from_secs(100_000), usize::MAX);
        let (result, took) = call(&worst, retries, Some(call_deadline(NOW + lease))).await;
        assert!(result.is_err());
        assert_eq!(
            worst.sent(),
            retries as usize + 1,
            "{retries} retries, lease {lease} s"
        );
        let commit_left = Duration::from_secs(lease as u64).saturating_sub(took);
        assert!(
            commit_left >= COMMIT_MARGIN,
            "{retries} retries took {took:?} of a {lease} s lease"
        );
    }
}
