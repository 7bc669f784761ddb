//! The model call (docs/decomposer.md#the-call): one OpenAI-compatible chat completion behind the
//! [`ModelClient`] trait, its real implementation on reqwest ([`HttpModel`]), and
//! [`call_model`], which retries transient failures and bills every HTTP request as one
//! `llm_calls` row.
//!
//! The API key goes only into the `Authorization` header; every message built here
//! comes from our own wording, and text from elsewhere (a provider's error message, an
//! I/O error) is scrubbed of the key and of the base URL's credentials first. Redirects
//! are never followed: a redirect would re-send the card to another origin, unbilled.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use board_core::{
    Breaker, BreakerSettings, BreakerSignal, EventKind, Fault, LlmCall, LlmLedger, LlmOutcome, LlmPurpose,
    TaskId, Timestamp,
};
use serde_json::Value;

use crate::settings::DecomposerSettings;

mod http;

pub use http::{ClientError, HttpModel};

/// The most response body read from a model; more is a failure (`response too large`).
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// No single wait between retries is longer than this, whatever `Retry-After` says.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// What a decomposition lease keeps for the commit after the model's answer: as long as
/// a write may wait for a busy SQLite board.
pub const COMMIT_MARGIN: Duration = Duration::from_secs(30);

/// What a lease keeps for the call to start: the lease is taken at the tick's time and
/// the call reads the clock again when it starts, both in whole seconds, so a tick that
/// crosses a second (one for the rounding, one for the start) must not leave the first
/// request outlasting the lease.
pub const START_SLACK: Duration = Duration::from_secs(2);

/// How long a card is leased to the gateway decomposing it: every request the call may
/// make (`transient_retries + 1`), each up to `timeout`, every wait between them at its
/// longest ([`MAX_RETRY_WAIT`]), the call's start ([`START_SLACK`]) and the commit's
/// margin. A live gateway's call ends
/// within it (its deadline is [`call_deadline`] of the lease's expiry); a dead one's
/// lease lapses after it.
pub fn lease_seconds(timeout: Duration, transient_retries: u32) -> i64 {
    let requests = u64::from(transient_retries) + 1;
    let total = timeout.as_secs().max(1).saturating_mul(requests)
        + MAX_RETRY_WAIT.as_secs() * u64::from(transient_retries)
        + START_SLACK.as_secs()
        + COMMIT_MARGIN.as_secs();
    i64::try_from(total).unwrap_or(i64::MAX)
}

/// The deadline of a call whose card is leased until `expires`: no request starts that
/// could still be out then, so the commit has its margin before anyone else may take
/// the card.
pub fn call_deadline(expires: Timestamp) -> Timestamp {
    expires.saturating_sub(COMMIT_MARGIN.as_secs() as i64)
}

/// Whether a request started after `wait` from `now` could still be out at the
/// attempt's deadline (it may take the whole `timeout`).
fn outlasts(deadline: Option<Timestamp>, now: Timestamp, wait: Duration, timeout: Duration) -> bool {
    let longest = wait.saturating_add(timeout).as_secs_f64().ceil() as i64;
    deadline.is_some_and(|d| now.saturating_add(longest) > d)
}

/// The Unix-seconds clock a decomposition reads: when a call starts and at commit.
pub type Clock = dyn Fn() -> Timestamp + Send + Sync;

/// A successful completion: the assistant's text and what the provider billed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelReply {
    /// `choices[0].message.content`.
    pub content: String,
    /// The HTTP status (a 2xx).
    pub http_status: u16,
    /// `usage.prompt_tokens`, when reported.
    pub prompt_tokens: Option<i64>,
    /// `usage.completion_tokens`, when reported.
    pub completion_tokens: Option<i64>,
}

/// What went wrong with one request, as `llm_calls.outcome` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The server answered with a non-2xx status.
    HttpError,
    /// No complete answer within the timeout.
    Timeout,
    /// The connection could not be made, or broke.
    ConnectionError,
    /// The body was over [`MAX_RESPONSE_BYTES`].
    TooLarge,
    /// A 2xx whose body is not a chat completion.
    BadResponse,
    /// Never sent: its `llm_calls` row could not be written first. It has no row and
    /// tells the breaker nothing.
    NotSent,
}

impl FailureKind {
    /// The `llm_calls.outcome` of a request that failed so.
    pub fn outcome(self) -> LlmOutcome {
        match self {
            FailureKind::HttpError => LlmOutcome::HttpError,
            FailureKind::Timeout => LlmOutcome::Timeout,
            FailureKind::ConnectionError => LlmOutcome::ConnectionError,
            FailureKind::TooLarge => LlmOutcome::TooLarge,
            FailureKind::BadResponse => LlmOutcome::BadResponse,
            FailureKind::NotSent => LlmOutcome::NotSent,
        }
    }
}

/// A failed request. Its message is one short line that never carries the API key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CallFailure {
    /// What kind of failure, for billing and for the retry decision.
    pub kind: FailureKind,
    /// The HTTP status, when the server answered.
    pub http_status: Option<u16>,
    /// The server's `Retry-After`, when it sent one in seconds.
    pub retry_after: Option<Duration>,
    /// What happened, e.g. `model answered HTTP 500: overloaded`.
    pub message: String,
}

impl CallFailure {
    fn new(kind: FailureKind, http_status: Option<u16>, message: impl Into<String>) -> CallFailure {
        CallFailure {
            kind,
            http_status,
            retry_after: None,
            message: message.into(),
        }
    }

    /// Whether the provider, not the card, is at fault: no answer (a connection error or
    /// a timeout), 5xx, 408, 429, or 401/403/404 (the key or the model is wrong). A reply
    /// that arrives but is malformed or too large is the card's.
    pub fn is_provider_fault(&self) -> bool {
        match self.kind {
            FailureKind::ConnectionError | FailureKind::Timeout => true,
            FailureKind::HttpError => matches!(
                self.http_status,
                Some(status) if status >= 500 || matches!(status, 401 | 403 | 404 | 408 | 429)
            ),
            FailureKind::TooLarge | FailureKind::BadResponse | FailureKind::NotSent => false,
        }
    }

    /// Whether the request went out (and is billed): all but [`FailureKind::NotSent`].
    pub fn was_sent(&self) -> bool {
        self.kind != FailureKind::NotSent
    }

    /// A 401 or 403: the key or the account is refused.
    pub fn is_auth(&self) -> bool {
        self.kind == FailureKind::HttpError && matches!(self.http_status, Some(401 | 403))
    }

    /// Whether another attempt may succeed: 5xx, 408, 429 and connection errors. A
    /// timeout is not retried: it already cost the whole timeout.
    pub fn is_transient(&self) -> bool {
        match self.kind {
            FailureKind::ConnectionError => true,
            FailureKind::HttpError => {
                matches!(self.http_status, Some(status) if status >= 500 || status == 408 || status == 429)
            }
            FailureKind::Timeout
            | FailureKind::TooLarge
            | FailureKind::BadResponse
            | FailureKind::NotSent => false,
        }
    }
}

/// Sends one chat-completion request: exactly one HTTP request per call, no retries
/// (those are [`call_model`]'s, so every attempt is billed). Tests swap it for a fake.
pub trait ModelClient: Send + Sync {
    /// Posts `body` to the chat-completions endpoint and returns the reply's text.
    fn send(&self, body: &Value) -> impl Future<Output = Result<ModelReply, CallFailure>> + Send;
}

/// One decomposition attempt as the provider breaker sees it: the card, a fresh id
/// shared by its transient retries, and how it was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub card: TaskId,
    /// Random, so the breaker tells a retry from a new attempt on the same card.
    pub id: String,
    /// The gateway's (automatic) attempts retry only while the provider is known up.
    pub automatic: bool,
    /// The breaker's one probe: never retried.
    pub probe: bool,
    /// Sent past a spend ceiling by a person: its rows say so.
    pub over_budget: bool,
    /// When the card's decomposition lease leaves no more time ([`call_deadline`]): no
    /// request, first or retry, starts that could still be out then. `None`: no lease
    /// (a person's call).
    pub deadline: Option<Timestamp>,
}

impl Attempt {
    /// A manual attempt on `card`, as `kanban decompose` makes.
    pub fn manual(card: &TaskId) -> Attempt {
        Attempt {
            card: card.clone(),
            id: attempt_id(),
            automatic: false,
            probe: false,
            over_budget: false,
            deadline: None,
        }
    }
}

/// A fresh attempt id; without randomness, the time in nanoseconds.
pub(crate) fn attempt_id() -> String {
    let mut bytes = [0u8; 8];
    match getrandom::fill(&mut bytes) {
        Ok(()) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        Err(_) => format!("{:?}", std::time::SystemTime::now()),
    }
}

/// A jitter factor drawn uniformly from [-0.1, 0.1]; without randomness, none.
pub(crate) fn jitter() -> f64 {
    match getrandom::u32() {
        Ok(n) => (f64::from(n) / f64::from(u32::MAX)) * 0.2 - 0.1,
        Err(_) => 0.0,
    }
}

/// The breaker's settings for a signal sent now.
pub(crate) fn breaker_settings(settings: &DecomposerSettings) -> BreakerSettings {
    BreakerSettings {
        base_seconds: settings.retry_policy.base_seconds,
        probe_max_seconds: settings.probe_max_seconds,
        jitter: jitter(),
        config_stamp: settings.config_stamp.clone(),
    }
}

/// Sends `body` through `client`, retrying transient failures
/// `settings.transient_retries` times, and records every attempt as one `llm_calls`
/// row of `purpose` for the attempt's card, whatever its result, with its cost at the
/// configured prices. The row is written `sent` before the request goes out and
/// finished when it ends, so a request whose gateway dies before the answer is still
/// billed; a request whose row cannot be written is not sent
/// ([`FailureKind::NotSent`]).
///
/// Every answer (any reply at all) and every provider fault is a signal to the provider
/// breaker; a retry is skipped when the attempt is the breaker's probe, when it is
/// automatic and the breaker no longer says the provider is up, or when it is a
/// person's and the breaker is open.
///
/// The n-th retry waits `n * settings.retry_backoff`, or the server's `Retry-After`
/// when it sent one, never more than [`MAX_RETRY_WAIT`]. No request starts that could
/// still be out at the attempt's deadline: a first one is not sent
/// ([`FailureKind::NotSent`]), a retry is not made (the last failure stands). A row
/// that cannot be finished is logged and does not fail the call: the answer was paid
/// for either way.
pub async fn call_model<C: ModelClient>(
    client: &C,
    store: &Arc<dyn LlmLedger>,
    attempt: &Attempt,
    purpose: LlmPurpose,
    body: &Value,
    settings: &DecomposerSettings,
    clock: &Clock,
) -> Result<ModelReply, CallFailure> {
    let mut retries: u32 = 0;
    if outlasts(attempt.deadline, clock(), Duration::ZERO, settings.timeout) {
        return Err(CallFailure::new(
            FailureKind::NotSent,
            None,
            "the request was not sent: its answer could come after the decomposition lease",
        ));
    }
    loop {
        let sent = LlmCall {
            task_id: Some(attempt.card.clone()),
            purpose,
            model: settings.model.clone(),
            started_at: clock(),
            outcome: LlmOutcome::Sent,
            over_budget: attempt.over_budget,
            ..LlmCall::default()
        };
        let Some(bill_id) = open_bill(store, sent.clone()).await else {
            return Err(CallFailure::new(
                FailureKind::NotSent,
                None,
                "the request was not sent: its llm_calls row could not be written",
            ));
        };
        let started = Instant::now();
        let result = client.send(body).await;
        let duration_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let mut row = ended(sent, duration_ms, &result);
        row.cost = settings.prices.cost(row.prompt_tokens, row.completion_tokens);
        finish_bill(store, bill_id, row).await;
        let breaker = signal(store, attempt, &result, settings, clock()).await;
        let failure = match result {
            Ok(completion) => return Ok(completion),
            Err(failure) => failure,
        };
        // An automatic attempt retries only while the provider is known up; a person's
        // is sent once while the breaker shows the provider down.
        let breaker_says_stop = match &breaker {
            Some(b) if attempt.automatic => !b.retry_allowed(&attempt.id),
            Some(b) => b.open,
            None => attempt.automatic,
        };
        if !failure.is_transient()
            || retries >= settings.transient_retries
            || attempt.probe
            || breaker_says_stop
        {
            return Err(failure);
        }
        retries += 1;
        let wait = failure
            .retry_after
            .unwrap_or_else(|| settings.retry_backoff.saturating_mul(retries))
            .min(MAX_RETRY_WAIT);
        if outlasts(attempt.deadline, clock(), wait, settings.timeout) {
            tracing::debug!(card = %attempt.card, wait_ms = wait.as_millis() as u64, "no retry: it would outlast the decomposition lease");
            return Err(failure);
        }
        tracing::debug!(card = %attempt.card, attempt = retries, wait_ms = wait.as_millis() as u64, error = %failure, "retrying model call");
        tokio::time::sleep(wait).await;
    }
}

/// Tells the provider breaker how a request went, logging the one line of an open or a
/// close; the breaker's state after, or `None` when it could not be written.
async fn signal(
    store: &Arc<dyn LlmLedger>,
    attempt: &Attempt,
    result: &Result<ModelReply, CallFailure>,
    settings: &DecomposerSettings,
    now: Timestamp,
) -> Option<Breaker> {
    let signal = match result {
        Err(failure) if failure.is_provider_fault() => BreakerSignal::Down(Fault {
            card: attempt.card.clone(),
            attempt: attempt.id.clone(),
            error: failure.message.clone(),
            auth: failure.is_auth(),
            retry_after: failure
                .retry_after
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
        }),
        _ => BreakerSignal::Up {
            card: attempt.card.clone(),
        },
    };
    signal_breaker(store, signal, breaker_settings(settings), now).await
}

/// Applies one signal to the breaker off the async threads, with the log line of the
/// open or the close it caused.
pub(crate) async fn signal_breaker(
    store: &Arc<dyn LlmLedger>,
    signal: BreakerSignal,
    settings: BreakerSettings,
    now: Timestamp,
) -> Option<Breaker> {
    let store = Arc::clone(store);
    let card = match &signal {
        BreakerSignal::Up { card }
        | BreakerSignal::ProbeTaken { card }
        | BreakerSignal::Ceiling { card, .. } => card.clone(),
        BreakerSignal::Down(fault) => fault.card.clone(),
    };
    let written = tokio::task::spawn_blocking(move || store.signal_breaker(&signal, &settings, now)).await;
    match written {
        Ok(Ok((breaker, event))) => {
            match event {
                Some(EventKind::BreakerOpened) => tracing::warn!(
                    card = %card,
                    error = breaker.last_error.as_deref().unwrap_or(""),
                    probe_at = breaker.probe_at,
                    auth = breaker.auth,
                    "the model provider is failing: automatic decomposition paused for every card"
                ),
                Some(EventKind::BreakerClosed) => tracing::info!(
                    card = %card,
                    "the model provider answers again: automatic decomposition resumes"
                ),
                _ => {}
            }
            Some(breaker)
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not update the provider breaker");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not update the provider breaker");
            None
        }
    }
}

/// The row of a request that ended: its `sent` row with how the request went.
fn ended(sent: LlmCall, duration_ms: i64, result: &Result<ModelReply, CallFailure>) -> LlmCall {
    let mut row = LlmCall { duration_ms, ..sent };
    match result {
        Ok(completion) => {
            row.outcome = LlmOutcome::Ok;
            row.http_status = Some(i64::from(completion.http_status));
            row.prompt_tokens = completion.prompt_tokens;
            row.completion_tokens = completion.completion_tokens;
        }
        Err(failure) => {
            row.outcome = failure.kind.outcome();
            row.http_status = failure.http_status.map(i64::from);
            row.error = Some(failure.message.clone());
        }
    }
    row
}

/// Writes the row of a request about to be sent; its id, or `None` (logged) when it
/// cannot be written.
async fn open_bill(store: &Arc<dyn LlmLedger>, row: LlmCall) -> Option<i64> {
    let store = Arc::clone(store);
    let written = tokio::task::spawn_blocking(move || store.record_llm_call(&row)).await;
    let error = match written {
        Ok(Ok(id)) => return Some(id),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    tracing::warn!(error = %error, "could not write an llm_calls row: the request is not sent");
    None
}

/// Finishes a request's row with how it ended; a failure is logged, and the row stays
/// `sent`.
async fn finish_bill(store: &Arc<dyn LlmLedger>, id: i64, row: LlmCall) {
    let store = Arc::clone(store);
    let written = tokio::task::spawn_blocking(move || store.finish_llm_call(id, &row)).await;
    let error = match written {
        Ok(Ok(true)) => return,
        Ok(Ok(false)) => "the row is no longer sent".to_owned(),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    tracing::warn!(id, error = %error, "could not finish an llm_calls row; the request's outcome is not recorded");
}
