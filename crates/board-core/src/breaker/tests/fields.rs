//! Every field each transition writes, pinned by comparing whole states: a transition
//! that forgot a field, or wrote one it should leave, changes the state compared.

use super::*;

fn fault(n: u8, attempt: &str, error: &str, auth: bool, retry_after: Option<i64>) -> BreakerSignal {
    BreakerSignal::Down(Fault {
        card: card(n),
        attempt: attempt.into(),
        error: error.into(),
        auth,
        retry_after,
    })
}

fn stamped(stamp: &str) -> BreakerSettings {
    BreakerSettings {
        config_stamp: Some(stamp.into()),
        ..settings()
    }
}

const E500: &str = "model answered HTTP 500";

#[test]
fn each_transition_writes_exactly_its_fields() {
    let seen = up_once();
    assert_eq!(
        seen,
        Breaker {
            last_success_at: Some(T),
            ..Breaker::default()
        }
    );
    let one = apply(&seen, &down(1, "a1"), T + 1);
    let noted_once = Breaker {
        fault_card: Some(card(1)),
        fault_attempt: Some("a1".into()),
        last_error: Some(E500.into()),
        ..seen.clone()
    };
    assert_eq!(one, noted_once, "a first fault is noted on its card");
    let open = apply_with(
        &one,
        &fault(2, "a2", "timed out", false, None),
        &stamped("b"),
        T + 2,
    );
    let expected_open = Breaker {
        open: true,
        opened_at: Some(T + 2),
        probe_at: Some(T + 2 + 30),
        opens: 1,
        auth: false,
        config_stamp: Some("b".into()),
        last_error: Some("timed out".into()),
        fault_card: None,
        fault_attempt: None,
        last_success_at: Some(T),
        ceiling: None,
        suspects: vec![card(1), card(2)],
    };
    assert_eq!(open, expected_open, "a second card's fault opens it");
    let noted = apply(&open, &fault(3, "a3", "HTTP 502", false, None), T + 3);
    assert_eq!(
        noted,
        Breaker {
            last_error: Some("HTTP 502".into()),
            suspects: vec![card(1), card(2), card(3)],
            ..open.clone()
        },
        "a fault while open notes its error and card, nothing else"
    );
    let probing = apply_with(
        &noted,
        &BreakerSignal::ProbeTaken { card: card(4) },
        &stamped("c"),
        T + 32,
    );
    assert_eq!(
        probing,
        Breaker {
            opens: 2,
            probe_at: Some(T + 32 + 60),
            config_stamp: Some("c".into()),
            ..noted.clone()
        },
        "a probe taken counts, waits twice as long and notes the config"
    );
    let change = observe(
        &probing,
        &BreakerSignal::Up { card: card(4) },
        &settings(),
        T + 100,
    )
    .expect("a change");
    assert_eq!(
        change.breaker,
        Breaker {
            last_success_at: Some(T + 100),
            last_error: Some("HTTP 502".into()),
            ..Breaker::default()
        },
        "closing forgets the outage but its last error"
    );
    assert_eq!(
        change.event.map(|e| e.payload),
        Some(json!({ "opened_at": T + 2, "probes": 1 }))
    );
    let recovered = apply(&one, &BreakerSignal::Up { card: card(1) }, T + 5);
    assert_eq!(
        recovered,
        Breaker {
            last_success_at: Some(T + 5),
            last_error: Some(E500.into()),
            ..Breaker::default()
        },
        "a success while closed forgets the fault's card and attempt"
    );
}

#[test]
fn faults_while_open_push_the_probe_back_and_never_forward() {
    let open = apply(&apply(&up_once(), &down(1, "a1"), T), &down(2, "a2"), T);
    assert_eq!(open.probe_at, Some(T + 30));
    let auth = apply_with(
        &open,
        &fault(3, "a3", "HTTP 401", true, None),
        &stamped("d"),
        T + 10,
    );
    assert_eq!(
        auth,
        Breaker {
            auth: true,
            config_stamp: Some("d".into()),
            probe_at: Some(T + 10 + 3600),
            last_error: Some("HTTP 401".into()),
            suspects: vec![card(1), card(2), card(3)],
            ..open.clone()
        }
    );
    let answered = apply(&auth, &BreakerSignal::Up { card: card(3) }, T + 20);
    assert_eq!(
        answered,
        Breaker {
            last_success_at: Some(T + 20),
            last_error: Some("HTTP 401".into()),
            ..Breaker::default()
        },
        "an answer ends the authentication hold too"
    );
    let later = apply(&open, &fault(3, "a3", "HTTP 429", false, Some(100)), T + 10);
    assert_eq!(later.probe_at, Some(T + 110), "Retry-After from now");
    let sooner = apply(&open, &fault(3, "a3", "HTTP 429", false, Some(5)), T + 10);
    assert_eq!(sooner.probe_at, Some(T + 30), "never earlier than planned");
    let huge = apply(&open, &fault(3, "a3", "HTTP 429", false, Some(99_999)), T + 10);
    assert_eq!(huge.probe_at, Some(T + 10 + 3600), "capped at the hour");
}

#[test]
fn never_seen_up_a_retry_within_one_attempt_does_not_open_it() {
    let first = apply(&Breaker::default(), &down(1, "a1"), T);
    let again = apply(&first, &down(1, "a1"), T + 1);
    assert!(!again.open, "a transient retry of the same attempt: {again:?}");
}

#[test]
fn suspects_are_the_cards_that_opened_or_kept_it_open_or_put_it_in_doubt() {
    let one = apply(&up_once(), &down(1, "a1"), T);
    assert!(one.suspected(&card(1)), "the unexplained fault's card");
    assert!(!one.suspected(&card(2)));
    let open = apply(&one, &down(2, "a2"), T);
    assert!(open.suspected(&card(1)) && open.suspected(&card(2)));
    assert!(!open.suspected(&card(3)));
    assert!(!up_once().suspected(&card(1)));
}

#[test]
fn the_state_reads_in_words_and_as_json() {
    assert_eq!(
        Breaker::default().state(),
        "closed (provider in doubt: one decomposition at a time)"
    );
    assert_eq!(up_once().state(), "closed");
    let open = apply(&apply(&up_once(), &down(1, "a1"), T + 1), &down(2, "a2"), T + 2);
    assert_eq!(open.state(), "open");
    assert_eq!(
        open.json(),
        json!({
            "state": "open",
            "in_doubt": false,
            "opened_at": T + 2,
            "probe_at": T + 32,
            "auth": false,
            "last_error": E500,
            "last_success_at": T,
            "ceiling": null,
        })
    );
    assert_eq!(Breaker::default().json()["state"], "closed");
    assert_eq!(Breaker::default().json()["in_doubt"], true);
}
