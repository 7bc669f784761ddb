//! The board-wide circuit breaker over the decomposer's provider (docs/decomposer.md#provider-outages),
//! as pure decisions. Its state, [`Breaker`], is one durable value per board; a store
//! applies a [`BreakerSignal`] to it atomically through [`observe`] and appends the event the
//! decision names. The planner reads it to decide whether automatic decompositions run
//! at full rate, carefully (one at a time, while a provider fault is unexplained), as one
//! probe, or not at all.
//!
//! A provider fault (no answer, a timeout, 5xx, 408, 429, 401/403/404) is a fact about
//! the provider, not about the card: it opens the breaker when faults come from two
//! different cards with no success between, or when the provider has never been seen up
//! and the same card fails again. A 401 or 403 opens it at once, until the config changes
//! or the cap passes. A fault is charged to its card only while the breaker stays closed
//! and the provider has been seen up, so an outage parks nobody.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::kinds::EventKind;
use crate::transition::{capped_delay, NewEvent, DECOMPOSE_RETRY_CAP_SECONDS};
use crate::types::{TaskId, Timestamp};

/// The board's view of its decomposer's provider. `Default` is a closed breaker that has
/// never seen the provider answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Breaker {
    /// Automatic decomposition is paused for every card.
    pub open: bool,
    /// When it opened (while open).
    pub opened_at: Option<Timestamp>,
    /// When the next probe may be sent (while open).
    pub probe_at: Option<Timestamp>,
    /// Probes taken since it opened, plus one: the exponent of the backoff.
    pub opens: i64,
    /// Opened by a 401 or 403: held until the config changes or the cap passes.
    pub auth: bool,
    /// The config's stamp when an authentication fault held it open.
    pub config_stamp: Option<String>,
    /// The last provider fault, one line.
    pub last_error: Option<String>,
    /// The card of the first provider fault since the last success, and its attempt.
    pub fault_card: Option<TaskId>,
    pub fault_attempt: Option<String>,
    /// The last time the provider answered.
    pub last_success_at: Option<Timestamp>,
    /// The spend ceiling that stops automatic decomposition, as last noted.
    pub ceiling: Option<String>,
    /// While open: the cards whose provider faults opened it or failed its probes, most
    /// recent last (at most [`MAX_SUSPECTS`]). A probe goes to another card when there
    /// is one, so one card that always fails cannot hold the board's breaker open.
    pub suspects: Vec<TaskId>,
}

/// How many suspect cards the breaker remembers.
pub const MAX_SUSPECTS: usize = 16;

fn suspect(list: &[TaskId], card: &TaskId) -> Vec<TaskId> {
    let mut list: Vec<TaskId> = list.iter().filter(|c| *c != card).cloned().collect();
    list.push(card.clone());
    let excess = list.len().saturating_sub(MAX_SUSPECTS);
    list.drain(..excess);
    list
}

/// How a provider fault looks to the breaker.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub card: TaskId,
    /// One decomposition attempt (its transient retries share it).
    pub attempt: String,
    pub error: String,
    /// A 401 or 403: the key or the account is wrong.
    pub auth: bool,
    /// The provider's `Retry-After`, in seconds.
    pub retry_after: Option<i64>,
}

/// What a store applies to the breaker, atomically.
#[derive(Clone, Debug, PartialEq)]
pub enum BreakerSignal {
    /// The provider answered a request about `card` (whatever the answer said).
    Up { card: TaskId },
    /// A request failed because of the provider.
    Down(Fault),
    /// The gateway hands `card` out as the one probe of this expiry.
    ProbeTaken { card: TaskId },
    /// The spend ceiling in force changed (`None`: the window allows again); noted on the
    /// card it holds back or releases.
    Ceiling { card: TaskId, reached: Option<String> },
}

/// The settings [`observe`] needs besides the signal: the backoff base, the longest wait
/// between probes (`None`: [`PROBE_CAP_BASES`] times the base), a jitter factor in
/// [-0.1, 0.1] (drawn by the caller) and the stamp of the config in force.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BreakerSettings {
    pub base_seconds: i64,
    pub probe_max_seconds: Option<i64>,
    pub jitter: f64,
    pub config_stamp: Option<String>,
}

/// The longest wait between probes, unless set, in backoff bases: 5 minutes at the
/// default 30 s base.
pub const PROBE_CAP_BASES: i64 = 10;

impl BreakerSettings {
    /// The longest wait between two probes: the setting, else [`PROBE_CAP_BASES`] times
    /// the base; never more than an hour. Decomposition resumes within it of the
    /// provider's return, after an outage of any length, while an outage costs about
    /// one request per cap.
    pub fn probe_cap(&self) -> i64 {
        let cap = self
            .probe_max_seconds
            .unwrap_or_else(|| self.base_seconds.max(1).saturating_mul(PROBE_CAP_BASES));
        cap.clamp(1, DECOMPOSE_RETRY_CAP_SECONDS)
    }

    /// The wait before the `n`-th probe since the breaker opened.
    fn probe_delay(&self, n: i64) -> i64 {
        capped_delay(self.base_seconds, n, self.probe_cap(), self.jitter)
    }
}

/// A change [`observe`] decided: the new state and the event to append (on `card`).
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerChange {
    pub breaker: Breaker,
    pub card: TaskId,
    pub event: Option<NewEvent>,
}

impl Breaker {
    /// Whether the one probe of this expiry may be sent at `now`: the breaker is open and
    /// its probe time has come, or it was held open by an authentication fault and the
    /// config has changed since.
    pub fn probe_due(&self, now: Timestamp, config_stamp: Option<&str>) -> bool {
        self.open
            && (self.probe_at.is_none_or(|at| now >= at)
                || (self.auth && self.config_stamp.as_deref() != config_stamp))
    }

    /// Whether the provider's state is in doubt while closed: it has never been seen up,
    /// or a provider fault since its last success is unexplained. Decompositions then
    /// run one at a time, so an outage costs two requests to find, not one per card.
    pub fn in_doubt(&self) -> bool {
        !self.open && (self.last_success_at.is_none() || self.fault_card.is_some())
    }

    /// Whether `card`'s own faults opened or kept open the breaker, or put it in doubt:
    /// the probe, and the one decomposition while in doubt, go to another card when
    /// there is one, so one card that always fails neither holds the breaker open nor
    /// opens it by being tried twice before anything shows the provider up.
    pub fn suspected(&self, card: &TaskId) -> bool {
        self.suspects.contains(card) || self.fault_card.as_ref() == Some(card)
    }

    /// Whether a provider fault just observed is charged to its card: the breaker stayed
    /// closed and the provider has been seen up, so the fault is the card's.
    pub fn charges(&self) -> bool {
        !self.open && self.last_success_at.is_some()
    }

    /// Whether a transient failure of `attempt` may be retried: only while the provider
    /// is known up and this attempt's faults are the only ones since its last success.
    pub fn retry_allowed(&self, attempt: &str) -> bool {
        !self.open && self.last_success_at.is_some() && self.fault_attempt.as_deref() == Some(attempt)
    }

    /// The state in words, for `stats`, `dispatch --dry-run` and `gateway.json`.
    pub fn state(&self) -> &'static str {
        match (self.open, self.in_doubt()) {
            (true, _) => "open",
            (false, true) => "closed (provider in doubt: one decomposition at a time)",
            (false, false) => "closed",
        }
    }

    /// The state as JSON: `state` is `open` or `closed`.
    pub fn json(&self) -> Value {
        json!({
            "state": if self.open { "open" } else { "closed" },
            "in_doubt": self.in_doubt(),
            "opened_at": self.opened_at,
            "probe_at": self.probe_at,
            "auth": self.auth,
            "last_error": self.last_error,
            "last_success_at": self.last_success_at,
            "ceiling": self.ceiling,
        })
    }

    fn opened(&self, fault: &Fault, settings: &BreakerSettings, now: Timestamp) -> Breaker {
        let delay = if fault.auth {
            DECOMPOSE_RETRY_CAP_SECONDS
        } else {
            let backoff = settings.probe_delay(1);
            backoff.max(fault.retry_after.unwrap_or(0).min(DECOMPOSE_RETRY_CAP_SECONDS))
        };
        let first = self.fault_card.iter().cloned().collect::<Vec<_>>();
        Breaker {
            open: true,
            suspects: suspect(&first, &fault.card),
            opened_at: Some(now),
            probe_at: Some(now + delay),
            opens: 1,
            auth: fault.auth,
            config_stamp: settings.config_stamp.clone(),
            last_error: Some(fault.error.clone()),
            fault_card: None,
            fault_attempt: None,
            ..self.clone()
        }
    }
}

/// Applies `signal` to `state` at `now`: the new state and its event, or `None` when
/// nothing changes.
pub fn observe(
    state: &Breaker,
    signal: &BreakerSignal,
    settings: &BreakerSettings,
    now: Timestamp,
) -> Option<BreakerChange> {
    let (breaker, card, event) = match signal {
        BreakerSignal::Up { card } => {
            let (breaker, event) = up(state, now);
            (breaker, card, event)
        }
        BreakerSignal::Down(fault) => {
            let (breaker, event) = down(state, fault, settings, now);
            (breaker, &fault.card, event)
        }
        BreakerSignal::ProbeTaken { card } => {
            if !state.open {
                return None;
            }
            let opens = state.opens + 1;
            let breaker = Breaker {
                opens,
                probe_at: Some(now + settings.probe_delay(opens)),
                config_stamp: settings.config_stamp.clone(),
                ..state.clone()
            };
            (breaker, card, None)
        }
        BreakerSignal::Ceiling { card, reached } => {
            let breaker = Breaker {
                ceiling: reached.clone(),
                ..state.clone()
            };
            let event = match reached {
                Some(ceiling) => breaker_event(EventKind::SpendCeilingReached, json!({ "ceiling": ceiling })),
                None => breaker_event(EventKind::SpendCeilingLifted, json!({ "ceiling": state.ceiling })),
            };
            (breaker, card, Some(event))
        }
    };
    (breaker != *state).then(|| BreakerChange {
        breaker,
        card: card.clone(),
        event,
    })
}

fn breaker_event(kind: EventKind, payload: serde_json::Value) -> NewEvent {
    NewEvent {
        kind,
        run_id: None,
        payload,
    }
}

/// A success: the provider is up, and an open breaker closes.
fn up(state: &Breaker, now: Timestamp) -> (Breaker, Option<NewEvent>) {
    let next = Breaker {
        last_success_at: Some(now),
        fault_card: None,
        fault_attempt: None,
        ..state.clone()
    };
    if !state.open {
        return (next, None);
    }
    let closed = Breaker {
        open: false,
        opened_at: None,
        probe_at: None,
        opens: 0,
        auth: false,
        config_stamp: None,
        suspects: Vec::new(),
        ..next
    };
    let payload = json!({ "opened_at": state.opened_at, "probes": (state.opens - 1).max(0) });
    (closed, Some(breaker_event(EventKind::BreakerClosed, payload)))
}

/// A provider fault: noted while open, opening the breaker once it shows an outage.
fn down(
    state: &Breaker,
    fault: &Fault,
    settings: &BreakerSettings,
    now: Timestamp,
) -> (Breaker, Option<NewEvent>) {
    if state.open {
        let mut next = Breaker {
            last_error: Some(fault.error.clone()),
            suspects: suspect(&state.suspects, &fault.card),
            ..state.clone()
        };
        if fault.auth {
            next.auth = true;
            next.config_stamp = settings.config_stamp.clone();
            next.probe_at = Some(now + DECOMPOSE_RETRY_CAP_SECONDS);
        } else if let Some(after) = fault.retry_after {
            let at = now + after.min(DECOMPOSE_RETRY_CAP_SECONDS);
            next.probe_at = Some(next.probe_at.map_or(at, |p| p.max(at)));
        }
        return (next, None);
    }
    let opens = match (&state.fault_card, &state.fault_attempt) {
        _ if fault.auth => true,
        (None, _) => false,
        (Some(card), _) if *card != fault.card => true,
        (Some(_), Some(attempt)) if *attempt == fault.attempt => false,
        // The same card failed again in a new attempt with no success between:
        // with the provider never seen up there is nothing to blame the card for.
        (Some(_), _) => state.last_success_at.is_none(),
    };
    if opens {
        let next = state.opened(fault, settings, now);
        let payload = json!({ "error": fault.error, "probe_at": next.probe_at, "auth": fault.auth });
        return (next, Some(breaker_event(EventKind::BreakerOpened, payload)));
    }
    let next = Breaker {
        fault_card: Some(fault.card.clone()),
        fault_attempt: Some(fault.attempt.clone()),
        last_error: Some(fault.error.clone()),
        ..state.clone()
    };
    (next, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    mod fields;

    const T: Timestamp = 1_750_000_000;

    fn card(n: u8) -> TaskId {
        TaskId::from_random([0, 0, 0, n])
    }

    fn settings() -> BreakerSettings {
        BreakerSettings {
            base_seconds: 30,
            probe_max_seconds: None,
            jitter: 0.0,
            config_stamp: Some("a".into()),
        }
    }

    fn down(n: u8, attempt: &str) -> BreakerSignal {
        BreakerSignal::Down(Fault {
            card: card(n),
            attempt: attempt.into(),
            error: "model answered HTTP 500".into(),
            auth: false,
            retry_after: None,
        })
    }

    fn apply(state: &Breaker, signal: &BreakerSignal, now: Timestamp) -> Breaker {
        apply_with(state, signal, &settings(), now)
    }

    fn apply_with(
        state: &Breaker,
        signal: &BreakerSignal,
        settings: &BreakerSettings,
        now: Timestamp,
    ) -> Breaker {
        observe(state, signal, settings, now).map_or_else(|| state.clone(), |c| c.breaker)
    }

    /// An outage of `seconds` from `T` with these settings: the breaker opened by two
    /// cards' faults, then every due probe failing. The requests it cost (the two that
    /// found it, then one per probe) and the gaps between probes.
    fn outage(settings: &BreakerSettings, seconds: i64) -> (usize, Vec<i64>) {
        let fault = |n, attempt: &str| down(n, attempt);
        let mut state = apply_with(&up_once(), &fault(1, "a1"), settings, T);
        state = apply_with(&state, &fault(2, "a2"), settings, T);
        assert!(state.open);
        let (mut requests, mut last, mut gaps) = (2, T, Vec::new());
        while let Some(at) = state.probe_at.filter(|at| *at < T + seconds) {
            state = apply_with(&state, &BreakerSignal::ProbeTaken { card: card(3) }, settings, at);
            state = apply_with(&state, &fault(3, "p"), settings, at);
            requests += 1;
            gaps.push(at - last);
            last = at;
        }
        // The provider is back at the end: the wait until the next probe finds it.
        gaps.push(state.probe_at.expect("a probe time") - (T + seconds));
        (requests, gaps)
    }

    fn up_once() -> Breaker {
        apply(&Breaker::default(), &BreakerSignal::Up { card: card(9) }, T)
    }

    #[test]
    fn faults_on_two_cards_open_it_and_probes_back_off_to_the_cap() {
        let one = apply(&up_once(), &down(1, "a1"), T + 1);
        assert!(!one.open && one.in_doubt() && one.charges());
        assert!(one.retry_allowed("a1") && !one.retry_allowed("a2"));
        let change = observe(&one, &down(2, "a2"), &settings(), T + 2).expect("a change");
        assert_eq!(
            change.event.as_ref().map(|e| e.kind),
            Some(EventKind::BreakerOpened)
        );
        let open = change.breaker;
        assert!(open.open && !open.charges() && !open.retry_allowed("a2"));
        assert_eq!(open.probe_at, Some(T + 32));
        assert_eq!(open.suspects, [card(1), card(2)]);
        assert!(!open.probe_due(T + 31, Some("a")) && open.probe_due(T + 32, Some("a")));
        let mut state = open;
        let mut delays = Vec::new();
        for _ in 0..10 {
            let at = state.probe_at.expect("a probe time");
            state = apply(&state, &BreakerSignal::ProbeTaken { card: card(3) }, at);
            state = apply(&state, &down(3, "p"), at);
            delays.push(state.probe_at.expect("a probe time") - at);
        }
        assert_eq!(&delays[..5], &[60, 120, 240, 300, 300]);
        assert_eq!(*delays.last().expect("ten"), 300, "capped at ten bases");
        let closed = observe(
            &state,
            &BreakerSignal::Up { card: card(3) },
            &settings(),
            T + 99_999,
        )
        .expect("a change");
        assert_eq!(
            closed.event.as_ref().map(|e| e.kind),
            Some(EventKind::BreakerClosed)
        );
        assert!(!closed.breaker.open && !closed.breaker.in_doubt());
    }

    #[test]
    fn one_failing_card_among_healthy_ones_is_charged_and_never_opens_it() {
        let mut state = up_once();
        for attempt in ["a1", "a2", "a3"] {
            state = apply(&state, &down(1, attempt), T + 1);
            state = apply(&state, &down(1, attempt), T + 1);
            assert!(!state.open && state.charges(), "{attempt}");
        }
        state = apply(&state, &BreakerSignal::Up { card: card(2) }, T + 2);
        assert!(!state.in_doubt());
    }

    #[test]
    fn never_seen_up_the_same_card_failing_twice_opens_it_uncharged() {
        let first = apply(&Breaker::default(), &down(1, "a1"), T);
        assert!(!first.open && !first.charges() && !first.retry_allowed("a1"));
        assert!(apply(&first, &down(1, "a2"), T + 30).open);
    }

    #[test]
    fn an_auth_fault_holds_it_open_until_the_config_changes_or_the_cap() {
        let fault = BreakerSignal::Down(Fault {
            card: card(1),
            attempt: "a1".into(),
            error: "model answered HTTP 401".into(),
            auth: true,
            retry_after: None,
        });
        let open = apply(&up_once(), &fault, T);
        assert!(open.open && open.auth);
        assert!(!open.probe_due(T + 3599, Some("a")));
        assert!(open.probe_due(T + 3600, Some("a")), "the cap");
        assert!(open.probe_due(T + 10, Some("b")), "an edited config");
    }

    #[test]
    fn retry_after_pushes_the_probe_back() {
        let mut state = apply(&up_once(), &down(1, "a1"), T);
        state = apply(
            &state,
            &BreakerSignal::Down(Fault {
                retry_after: Some(300),
                ..Fault {
                    card: card(2),
                    attempt: "a2".into(),
                    error: "429".into(),
                    auth: false,
                    retry_after: None,
                }
            }),
            T,
        );
        assert_eq!(state.probe_at, Some(T + 300));
    }

    #[test]
    fn probes_wait_at_most_the_cap_so_recovery_is_prompt_and_an_hour_costs_one_request_a_cap() {
        let default = settings();
        assert_eq!(default.probe_cap(), 300, "ten bases of 30 s: 5 minutes");
        for hours_of_outage in [1, 10] {
            let (requests, gaps) = outage(&default, 3600 * hours_of_outage);
            let longest = gaps.iter().max().copied().unwrap_or(0);
            assert!(longest <= 300, "a gap of {longest} s: {gaps:?}");
            // Two requests find it, the doubling to the cap takes 4 probes, then one a cap.
            let most = 2 + 4 + (3600 * hours_of_outage as usize) / 300;
            assert!(requests <= most, "{requests} requests, at most {most}");
        }
        let (requests, _) = outage(&default, 3600);
        assert_eq!(requests, 16, "an hour-long outage at the defaults");
        let jittered = BreakerSettings {
            jitter: 0.1,
            ..settings()
        };
        let (_, gaps) = outage(&jittered, 3600);
        assert!(
            gaps.iter().all(|g| *g <= 330),
            "the cap plus its jitter: {gaps:?}"
        );
        let base_two = BreakerSettings {
            base_seconds: 2,
            ..settings()
        };
        assert_eq!(base_two.probe_cap(), 20, "scaled with the base");
        let (requests, gaps) = outage(&base_two, 150);
        assert!(gaps.iter().all(|g| *g <= 20), "{gaps:?}");
        assert!(requests <= 2 + 4 + 150 / 20, "{requests}");
    }

    #[test]
    fn a_set_probe_cap_wins_up_to_an_hour() {
        let set = |seconds| BreakerSettings {
            probe_max_seconds: Some(seconds),
            ..settings()
        };
        assert_eq!(set(60).probe_cap(), 60);
        assert_eq!(set(7200).probe_cap(), 3600, "never past the hour");
        let (_, gaps) = outage(&set(60), 600);
        assert_eq!(
            &gaps[..4],
            &[30, 60, 60, 60],
            "the first probe at the base, then the cap"
        );
        let (_, gaps) = outage(&set(10), 100);
        assert_eq!(gaps[0], 10, "a cap below the base shortens the first wait too");
    }

    #[test]
    fn a_ceiling_is_noted_once_and_lifted_once() {
        let reached = BreakerSignal::Ceiling {
            card: card(1),
            reached: Some("max_requests_per_day".into()),
        };
        let change = observe(&Breaker::default(), &reached, &settings(), T).expect("a change");
        assert_eq!(
            change.event.as_ref().map(|e| e.kind),
            Some(EventKind::SpendCeilingReached)
        );
        assert!(observe(&change.breaker, &reached, &settings(), T + 1).is_none());
        let lifted = BreakerSignal::Ceiling {
            card: card(1),
            reached: None,
        };
        let change = observe(&change.breaker, &lifted, &settings(), T + 2).expect("a change");
        assert_eq!(
            change.event.as_ref().map(|e| e.kind),
            Some(EventKind::SpendCeilingLifted)
        );
    }
}
