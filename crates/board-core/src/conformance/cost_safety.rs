//! Cost safety as every store keeps it: the provider breaker is one durable value that
//! signals change atomically with their event (one event per open or close, however many
//! signals race), and the ledger's sums count the calls of a window.

use std::sync::{Arc, Barrier};

use super::{event_kinds, Backend, T0};
use crate::breaker::{BreakerSettings, BreakerSignal, Fault};
use crate::kinds::EventKind;
use crate::store::Store;
use crate::types::{LlmCall, Status, TaskId};
use crate::NewTask;
use crate::{LlmOutcome, LlmPurpose};

fn triage_card(s: &dyn Store, title: &str) -> TaskId {
    let card = NewTask {
        triage: true,
        ..NewTask::titled(title)
    };
    s.create(&card, T0).expect("create").id
}

fn settings() -> BreakerSettings {
    BreakerSettings {
        base_seconds: 30,
        probe_max_seconds: None,
        jitter: 0.0,
        config_stamp: Some("one".into()),
    }
}

fn down(card: &TaskId, attempt: &str) -> BreakerSignal {
    BreakerSignal::Down(Fault {
        card: card.clone(),
        attempt: attempt.into(),
        error: "model answered HTTP 500".into(),
        auth: false,
        retry_after: None,
    })
}

/// Two cards failing with no success between open the breaker, once, durably; a success
/// closes it, once. A signal about a card that does not exist changes nothing.
pub fn breaker_opens_and_closes_durably(board: &dyn Backend) {
    let s = board.connect();
    let (a, b) = (triage_card(&*s, "a"), triage_card(&*s, "b"));
    assert_eq!(s.breaker().expect("read"), Default::default());
    let (state, event) = s.signal_breaker(&down(&a, "1"), &settings(), T0).expect("signal");
    assert!(!state.open && event.is_none());
    let (state, event) = s
        .signal_breaker(&down(&b, "2"), &settings(), T0 + 1)
        .expect("signal");
    assert!(state.open);
    assert_eq!(event, Some(EventKind::BreakerOpened));
    assert_eq!(state.probe_at, Some(T0 + 31));
    let reread = board.connect().breaker().expect("read");
    assert_eq!(reread, state, "durable, and seen by another connection");
    let (_, event) = s
        .signal_breaker(&down(&a, "3"), &settings(), T0 + 2)
        .expect("signal");
    assert_eq!(event, None, "an open breaker opens no more");
    let ghost = TaskId::from_random([0xde, 0xad, 0xbe, 0xef]);
    assert!(s
        .signal_breaker(&BreakerSignal::Up { card: ghost }, &settings(), T0 + 3)
        .is_err());
    assert!(
        s.breaker().expect("read").open,
        "a refused signal changes nothing"
    );
    let (state, event) = s
        .signal_breaker(&BreakerSignal::Up { card: a.clone() }, &settings(), T0 + 4)
        .expect("signal");
    assert!(!state.open && event == Some(EventKind::BreakerClosed));
    assert_eq!(state.last_success_at, Some(T0 + 4));
    assert_eq!(event_kinds(&*s, &b), vec!["created", "breaker_opened"]);
    assert_eq!(event_kinds(&*s, &a), vec!["created", "breaker_closed"]);
    assert_eq!(s.get(&a).expect("get").status, Status::Triage);
}

/// Faults of many cards racing on separate connections open the breaker exactly once.
pub fn racing_faults_open_the_breaker_once(board: &dyn Backend) {
    const THREADS: usize = 8;
    let s = board.connect();
    let cards: Vec<TaskId> = (0..THREADS)
        .map(|i| triage_card(&*s, &format!("card {i}")))
        .collect();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = cards
        .iter()
        .cloned()
        .map(|card| {
            let (store, barrier) = (board.connect(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                store
                    .signal_breaker(&down(&card, card.as_str()), &settings(), T0)
                    .expect("signal")
                    .1
            })
        })
        .collect();
    let events: Vec<_> = handles
        .into_iter()
        .filter_map(|h| h.join().expect("thread"))
        .collect();
    assert_eq!(events, vec![EventKind::BreakerOpened]);
    assert!(s.breaker().expect("read").open);
}

/// The spend of a window counts the rows started in it, by outcome, with their tokens,
/// costs and the requests sent past a ceiling.
pub fn spend_sums_the_window(board: &dyn Backend) {
    let s = board.connect();
    let card = triage_card(&*s, "billed");
    let call =
        |started_at: i64, outcome: &str, tokens: Option<i64>, cost: Option<f64>, over_budget: bool| LlmCall {
            task_id: Some(card.clone()),
            purpose: LlmPurpose::Decompose,
            model: "m".into(),
            started_at,
            duration_ms: 5,
            outcome: outcome.parse().expect("an outcome"),
            http_status: Some(200),
            prompt_tokens: tokens,
            completion_tokens: tokens.map(|t| t / 2),
            error: None,
            cost,
            over_budget,
        };
    for row in [
        call(T0 - 100_000, "ok", Some(1000), Some(1.0), false),
        call(T0, "ok", Some(100), Some(0.25), false),
        call(T0 + 1, "http_error", None, None, false),
        call(T0 + 2, "ok", Some(10), Some(0.5), true),
    ] {
        s.record_llm_call(&row).expect("record");
    }
    let window = s.spend(T0).expect("spend");
    assert_eq!(
        (window.requests, window.prompt_tokens, window.completion_tokens),
        (3, 110, 55)
    );
    assert_eq!(window.cost, Some(0.75));
    assert_eq!(window.over_budget, 1);
    assert_eq!(window.by_outcome.get("http_error"), Some(&1));
    assert_eq!(window.by_outcome.get("ok"), Some(&2));
    let all = s.spend(i64::MIN).expect("spend");
    assert_eq!((all.requests, all.cost), (4, Some(1.75)));
    assert_eq!(s.spend(T0 + 3).expect("spend"), Default::default());
    let rows = s.llm_calls(Some(&card)).expect("rows");
    assert_eq!(
        rows.last().map(|r| (r.cost, r.over_budget)),
        Some((Some(0.5), true))
    );
}

/// A request is billed `sent` before it goes out and counts in the spend at once; its
/// row is finished once with how it ended. A finished row, or an unknown id, is never
/// finished again.
pub fn an_open_request_is_billed_then_finished_once(board: &dyn Backend) {
    let s = board.connect();
    let card = triage_card(&*s, "in flight");
    let sent = LlmCall {
        task_id: Some(card.clone()),
        purpose: LlmPurpose::Decompose,
        model: "m".into(),
        started_at: T0,
        outcome: LlmOutcome::Sent,
        ..LlmCall::default()
    };
    let id = s.record_llm_call(&sent).expect("record");
    let open = s.spend(T0).expect("spend");
    assert_eq!(open.requests, 1, "an unanswered request is counted");
    assert_eq!(open.by_outcome.get(LlmOutcome::Sent.as_str()), Some(&1));
    let answered = LlmCall {
        duration_ms: 40,
        outcome: LlmOutcome::Ok,
        http_status: Some(200),
        prompt_tokens: Some(30),
        completion_tokens: Some(12),
        cost: Some(0.5),
        ..sent.clone()
    };
    assert!(s.finish_llm_call(id, &answered).expect("finish"));
    assert_eq!(s.llm_calls(Some(&card)).expect("rows"), vec![answered.clone()]);
    let later = LlmCall {
        outcome: LlmOutcome::Timeout,
        ..answered.clone()
    };
    assert!(!s.finish_llm_call(id, &later).expect("finish"), "finished once");
    assert!(
        !s.finish_llm_call(id + 1000, &later).expect("finish"),
        "no such row"
    );
    let done = s.record_llm_call(&answered).expect("record");
    assert!(
        !s.finish_llm_call(done, &later).expect("finish"),
        "billed finished"
    );
    assert_eq!(
        s.llm_calls(Some(&card)).expect("rows"),
        vec![answered.clone(), answered],
        "nothing changed"
    );
    let spent = s.spend(T0).expect("spend");
    assert_eq!(
        (spent.requests, spent.prompt_tokens, spent.cost),
        (2, 60, Some(1.0))
    );
    assert_eq!(spent.by_outcome.get(LlmOutcome::Sent.as_str()), None);
}
