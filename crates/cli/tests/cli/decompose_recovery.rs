//! Decomposition after failures and outages, through a running gateway and the fake
//! model (docs/decomposer.md#failure-policy, #cost-safety): a card that always makes the
//! provider fail among healthy cards that keep arriving is parked at the failure limit
//! and never stalls them. Judged from outside: the fake's request log and the board's
//! rows and events. Time is compressed through `decompose_retry_base_seconds`.

use crate::gateway_board;

use std::cell::RefCell;
use std::time::Duration;

use board_core::{Status, TaskId};
use fake_llm::Reply;
use gateway_board::{Board, Setup, SINGLE};

const FAILURE_LIMIT: i64 = 3;
const RETRIES: usize = 2;

/// A card that always gets HTTP 500, created while the gateway runs and before the
/// provider was ever seen to answer (so its first fault is not charged to it: nothing
/// says the provider is up), among healthy cards that keep arriving so that `waiting`
/// of them are always in triage. Its faults are slow enough that the first healthy
/// cards exist before its first one ends. It is parked at the failure limit, billed
/// for its attempts only, never again after, and the breaker never opens.
fn always_500_among_arriving_healthy_cards(waiting: usize, concurrency: usize) {
    let mut b = Board::new(Setup {
        kanban_extra: "  decompose_retry_base_seconds: 1\n  decompose_failure_limit: 3\n",
        transient_retries: RETRIES as u32,
        per_tick: concurrency,
        concurrency,
        ..Setup::default()
    });
    let slow = |reply| Reply::delayed(Duration::from_millis(300), reply);
    b.default_reply(Some(slow(Reply::text(SINGLE))));
    b.reply(
        "always 500",
        slow(Reply::error(500, "this card breaks the provider")),
    );
    b.start_gateway();
    let bad = b.create(&["always 500", "--triage"]);
    let healthy: RefCell<Vec<TaskId>> = RefCell::new(Vec::new());
    b.wait_for("the always-500 card parked", || {
        let mut healthy = healthy.borrow_mut();
        let in_triage = healthy
            .iter()
            .filter(|c| b.task(c).status == Status::Triage)
            .count();
        for _ in in_triage..waiting {
            let n = healthy.len();
            healthy.push(b.create(&[&format!("healthy {n}"), "--triage"]));
        }
        let task = b.task(&bad);
        assert!(
            task.decompose_failures < FAILURE_LIMIT || task.decompose_parked,
            "at the limit but not parked: {task:?}"
        );
        task.decompose_parked
    });
    let decomposed = healthy
        .into_inner()
        .iter()
        .filter(|c| b.task(c).status != Status::Triage)
        .count();
    assert!(
        decomposed >= 3,
        "only {decomposed} healthy cards decomposed meanwhile"
    );
    let parked = b.task(&bad);
    assert_eq!(parked.decompose_failures, FAILURE_LIMIT);
    assert_eq!(parked.status, Status::Triage);
    let kinds = b.kinds(&bad);
    let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
    assert_eq!(
        count("auto_decompose_failed"),
        FAILURE_LIMIT as usize,
        "{kinds:?}"
    );
    assert_eq!(count("auto_decompose_parked"), 1, "{kinds:?}");
    // Each charged attempt sends its retries; the first, uncharged, sends one.
    let bills = b.bills(&bad);
    let most = FAILURE_LIMIT as usize * (RETRIES + 1) + 1;
    assert!(bills <= most, "{bills} requests for the bad card, at most {most}");
    // Parked means never sent again: a few more healthy cards go through meanwhile.
    for n in 0..3 {
        let card = b.create(&[&format!("after {n}"), "--triage"]);
        b.wait_for("a healthy card after the park", || {
            b.task(&card).status != Status::Triage
        });
    }
    assert_eq!(b.bills(&bad), bills, "a parked card was sent again");
    let events = b.snapshot().events;
    assert!(
        !events.iter().any(|e| e.kind == "breaker_opened"),
        "one failing card opened the breaker"
    );
    b.kill_gateway();
}

#[test]
fn a_card_that_always_gets_500_among_healthy_cards_arriving_one_by_one_is_parked() {
    always_500_among_arriving_healthy_cards(1, 4);
}

#[test]
fn a_card_that_always_gets_500_behind_a_backlog_of_fresh_cards_is_parked() {
    always_500_among_arriving_healthy_cards(6, 2);
}
