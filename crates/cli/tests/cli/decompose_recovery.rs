//! Decomposition after failures and outages, through a running gateway and the fake
//! model (docs/decomposer.md#failure-policy, #cost-safety): a card that always makes the
//! provider fail among healthy cards that keep arriving is parked at the failure limit
//! and never stalls them; after a long outage decomposition resumes within the probe
//! cap of the provider's return. Judged from outside: the fake's request log and the
//! board's rows and events. Time is compressed through `decompose_retry_base_seconds`.

use crate::gateway_board;

use std::cell::RefCell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::{LlmLedger, Status, TaskId};
use fake_llm::Reply;
use gateway_board::{GatewayBoard, Setup, SINGLE};

const FAILURE_LIMIT: i64 = 3;
const RETRIES: usize = 2;

/// A card that always gets HTTP 500, created while the gateway runs and before the
/// provider was ever seen to answer (so its first fault is not charged to it: nothing
/// says the provider is up), among healthy cards that keep arriving so that `waiting`
/// of them are always in triage. Its faults are slow enough that the first healthy
/// cards exist before its first one ends. It is parked at the failure limit, billed
/// for its attempts only, never again after, and the breaker never opens.
fn always_500_among_arriving_healthy_cards(waiting: usize, concurrency: usize) {
    let mut b = GatewayBoard::new(Setup {
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

/// The probe cap at a 1 s base when `decompose_probe_max_seconds` is unset: ten bases.
const PROBE_CAP: Duration = Duration::from_secs(10);

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Twenty cards, HTTP 500 for 36 bases, then a healthy model. The doubling alone would
/// have its probes about 31 and 63 bases after the open, so the provider's return would
/// wait some 20 bases more; capped at 10 bases, every card is sent and decomposed within
/// the cap (plus its jitter and a tick) of the return, and the outage still costs about
/// one request per cap.
#[test]
fn after_a_long_outage_decomposition_resumes_within_the_probe_cap() {
    const OUTAGE: Duration = Duration::from_secs(36);
    let mut b = GatewayBoard::new(Setup {
        kanban_extra: "  decompose_retry_base_seconds: 1\n",
        transient_retries: RETRIES as u32,
        per_tick: 20,
        concurrency: 20,
        ..Setup::default()
    });
    b.default_reply(Some(Reply::error(500, "the provider is down")));
    let cards: Vec<TaskId> = (0..20)
        .map(|n| b.create(&[&format!("card {n}"), "--triage"]))
        .collect();
    let started = Instant::now();
    b.start_gateway();
    b.wait_for("the breaker to open", || b.db().breaker().unwrap().open);
    // The outage is the scenario: it lasts its time, whatever the gateway does.
    std::thread::sleep(OUTAGE.saturating_sub(started.elapsed()));
    let during = b.fake.requests().len();
    let healed_ms = unix_ms();
    let healed = Instant::now();
    b.default_reply(None);
    let limit = PROBE_CAP + PROBE_CAP / 10 + Duration::from_secs(4);
    let in_triage = || {
        cards
            .iter()
            .filter(|c| b.task(c).status == Status::Triage)
            .count()
    };
    gateway_board::wait_until("every card decomposed", limit, || in_triage() == 0);
    let recovered = healed.elapsed();
    let first_after = b
        .fake
        .requests()
        .iter()
        .find(|r| r.received_at_ms >= healed_ms)
        .map(|r| r.received_at_ms - healed_ms);
    eprintln!(
        "{during} requests in a {} s outage; first request {first_after:?} ms and every card decomposed {} ms after the return",
        OUTAGE.as_secs(),
        recovered.as_millis()
    );
    // Two requests find the outage, four probes double the wait to the cap, then one
    // probe a cap (and one more for the jitter).
    let most = 2 + 4 + (OUTAGE.as_secs() / PROBE_CAP.as_secs()) as usize + 1;
    assert!(
        during <= most,
        "{during} requests during the outage, at most {most}"
    );
    for card in &cards {
        let task = b.task(card);
        assert_eq!(task.decompose_failures, 0, "{card} was charged for the outage");
    }
    b.kill_gateway();
}
