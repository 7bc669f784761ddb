//! Notifications (`kanban notify-subscribe`): a webhook subscribed to one task's events or
//! the board's, of some kinds. The gateway delivers each matching event as a signed JSON
//! POST, in event order, at least once (the delivery's key says which event it is, so a
//! receiver drops a repeat), retrying with backoff; a subscription that keeps failing is
//! paused, not hammered. A subscription's state is a cursor over the board's events, moved
//! only past an event its receiver accepted.

use serde::{Deserialize, Serialize};

use crate::refusal::Refusal;
use crate::store::StoreResult;
use crate::types::{TaskId, Timestamp};

/// The kinds a subscription hears when it names none: what needs a person.
pub const DEFAULT_KINDS: &[&str] = &["completed", "blocked", "review_requested", "gave_up"];
/// Failed deliveries in a row that pause a subscription.
pub const PAUSE_AFTER_FAILURES: i64 = 8;
/// The longest wait between two attempts.
pub const BACKOFF_MAX_SECONDS: i64 = 3600;
/// The longest webhook URL.
const URL_MAX_BYTES: usize = 2048;

/// A webhook and what it hears.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: i64,
    /// The task it hears; none: every task of the board.
    pub task_id: Option<TaskId>,
    pub kinds: Vec<String>,
    pub url: String,
    /// The HMAC-SHA256 key of its signatures: the subscriber's, never shown again.
    #[serde(skip_serializing)]
    pub secret: String,
    pub created_at: Timestamp,
    /// The newest event delivered (or passed over when it subscribed).
    pub after_event: i64,
    /// Failed deliveries in a row.
    pub failures: i64,
    /// No attempt before this time (a failure's backoff).
    pub next_attempt_at: Option<Timestamp>,
    /// Paused after too many failures: nothing is sent until `notify-resume`.
    pub paused: bool,
    /// How the last attempt went: `200`, `HTTP 500`, `timed out`, ...
    pub last_status: Option<String>,
    pub last_attempt_at: Option<Timestamp>,
}

/// A subscription to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSubscription {
    pub task_id: Option<TaskId>,
    pub kinds: Vec<String>,
    pub url: String,
    pub secret: String,
}

impl NewSubscription {
    /// Refuses a URL that is not `http://` or `https://` with a host, that carries
    /// credentials, holds a control character or space, or is over 2 KiB; a kind that is
    /// not a plain word; a secret shorter than 16 bytes. Kinds default to
    /// [`DEFAULT_KINDS`], trimmed, repeats dropped.
    pub fn admit(mut self) -> Result<NewSubscription, Refusal> {
        check_url(&self.url)?;
        if self.secret.len() < 16 || self.secret.chars().any(char::is_control) {
            return Err(Refusal::Invalid("a signing secret is at least 16 bytes".into()));
        }
        let mut kinds: Vec<String> = Vec::new();
        for kind in self.kinds.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
            if !kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') || kind.len() > 64 {
                return Err(Refusal::Invalid(format!("not an event kind: {kind:?}")));
            }
            if !kinds.iter().any(|k| k == kind) {
                kinds.push(kind.to_owned());
            }
        }
        if kinds.is_empty() {
            kinds = DEFAULT_KINDS.iter().map(|k| (*k).to_owned()).collect();
        }
        self.kinds = kinds;
        Ok(self)
    }
}

/// Refuses a webhook URL the gateway would not post to (see [`NewSubscription::admit`]).
pub fn check_url(url: &str) -> Result<(), Refusal> {
    let bad = |why: &str| {
        Err(Refusal::Invalid(format!(
            "not a webhook URL ({why}): {:?}",
            url.chars().take(80).collect::<String>()
        )))
    };
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return bad("http:// or https://");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return bad("no host");
    }
    if authority.contains('@') {
        return bad("no credentials in it");
    }
    if url.len() > URL_MAX_BYTES || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return bad("at most 2 KiB, no spaces or control characters");
    }
    Ok(())
}

/// When a subscription that has failed `failures` times in a row may try again after
/// `now`, and whether it is paused: 2, 4, 8, ... seconds, at most an hour; paused at
/// [`PAUSE_AFTER_FAILURES`].
pub fn after_failure(failures: i64, now: Timestamp) -> (Timestamp, bool) {
    let wait = 1i64
        .checked_shl(failures.clamp(1, 20) as u32)
        .unwrap_or(BACKOFF_MAX_SECONDS)
        .min(BACKOFF_MAX_SECONDS);
    (now.saturating_add(wait), failures >= PAUSE_AFTER_FAILURES)
}

/// How one delivery went, as the store records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The receiver accepted the event: the cursor moves past it.
    Delivered { event: i64, status: String },
    /// It did not: the cursor stays, the next attempt waits (or the subscription pauses).
    Failed { status: String },
    /// No event it hears up to `upto`, which has settled: the cursor moves past them.
    Passed { upto: i64 },
}

/// The store's side of notifications.
pub trait NotifyDesk: Send + Sync {
    /// Records a subscription whose cursor is the board's newest event: it hears what
    /// happens from now on. Refused for an unknown task.
    fn subscribe(&self, new: &NewSubscription, now: Timestamp) -> StoreResult<Subscription>;
    /// Every subscription, oldest first.
    fn subscriptions(&self) -> StoreResult<Vec<Subscription>>;
    /// Removes one; an unknown id is refused.
    fn unsubscribe(&self, id: i64) -> StoreResult<Subscription>;
    /// Records an attempt of subscription `id` made while its cursor was `from`: moves
    /// the cursor on a delivery, counts a failure (backoff, and the pause) otherwise.
    /// `false` when the cursor moved meanwhile (another gateway delivered): nothing
    /// changes.
    fn record_delivery(&self, id: i64, from: i64, delivery: &Delivery, now: Timestamp) -> StoreResult<bool>;
    /// Lifts a pause and the backoff; an unknown id is refused.
    fn resume_subscription(&self, id: i64) -> StoreResult<Subscription>;
}

/// What an attempt made from cursor `from` makes of `sub`: [`recorded`], or none when
/// the cursor moved meanwhile (another gateway delivered) and nothing may change.
pub fn attempted(sub: Subscription, from: i64, delivery: &Delivery, now: Timestamp) -> Option<Subscription> {
    (sub.after_event == from).then(|| recorded(sub, delivery, now))
}

/// `sub` resumed: no pause, no failures, no backoff.
pub fn resumed(mut sub: Subscription) -> Subscription {
    sub.paused = false;
    sub.failures = 0;
    sub.next_attempt_at = None;
    sub
}

/// What [`NotifyDesk::record_delivery`] makes of a subscription: the decision every store
/// applies.
pub fn recorded(mut sub: Subscription, delivery: &Delivery, now: Timestamp) -> Subscription {
    sub.last_attempt_at = Some(now);
    match delivery {
        Delivery::Delivered { event, status } => {
            sub.after_event = (*event).max(sub.after_event);
            sub.failures = 0;
            sub.next_attempt_at = None;
            sub.last_status = Some(status.clone());
        }
        Delivery::Passed { upto } => sub.after_event = (*upto).max(sub.after_event),
        Delivery::Failed { status } => {
            sub.failures = sub.failures.saturating_add(1);
            let (next, paused) = after_failure(sub.failures, now);
            sub.next_attempt_at = Some(next);
            sub.paused = sub.paused || paused;
            sub.last_status = Some(status.clone());
        }
    }
    sub
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(url: &str) -> NewSubscription {
        NewSubscription {
            task_id: None,
            kinds: vec![" blocked ".into(), "blocked".into()],
            url: url.into(),
            secret: "0123456789abcdef".into(),
        }
    }

    #[test]
    fn urls_kinds_and_secrets_are_checked() {
        assert_eq!(new("http://127.0.0.1:9/hook").admit().unwrap().kinds, ["blocked"]);
        let mut none = new("https://example.com");
        none.kinds.clear();
        assert_eq!(none.admit().unwrap().kinds, DEFAULT_KINDS);
        for bad in [
            "ftp://x",
            "http://",
            "http://user:pw@host/",
            "http://host/a b",
            "http://host/\n",
            "host/path",
        ] {
            assert!(new(bad).admit().is_err(), "{bad}");
        }
        let mut short = new("http://h");
        short.secret = "short".into();
        assert!(short.admit().is_err());
        let mut odd = new("http://h");
        odd.kinds = vec!["Completed!".into()];
        assert!(odd.admit().is_err());
    }

    #[test]
    fn failures_back_off_to_an_hour_and_pause_at_the_limit() {
        assert_eq!(after_failure(1, 100), (102, false));
        assert_eq!(after_failure(3, 100), (108, false));
        assert_eq!(after_failure(7, 100), (228, false));
        assert_eq!(after_failure(PAUSE_AFTER_FAILURES, 100), (356, true));
        assert_eq!(after_failure(40, 100).0, 100 + BACKOFF_MAX_SECONDS);
    }
}
