//! Cost safety through a running gateway and the fake model (docs/decomposer.md#cost-safety):
//! an outage costs a logarithmic number of requests in total, parks nobody and ends by
//! itself (also across a gateway restart); one card that makes the provider fail among
//! healthy ones is parked without stalling the rest; a 401 holds everything until the
//! config changes (and is reloaded); a spend ceiling stops automatic decomposition and a person can go
//! past it on the record; a token ceiling counts tokens in and out, a cost ceiling both
//! prices. Time is compressed through `decompose_retry_base_seconds`. What the gateway did
//! and when is judged from outside: the fake model's request log and the board's rows,
//! never the gateway's own counters (those only show it is alive).

use crate::gateway_board;

use board_core::{LlmLedger, LlmOutcome, Status, TaskId};
use std::time::Duration;

use fake_llm::{RecordedRequest, Reply, Usage};
use gateway_board::{GatewayBoard, Setup};

/// `log2(outage / base)` rounded up, plus the two faults that show the outage.
fn outage_bound(outage_seconds: u64, base_seconds: u64) -> usize {
    (outage_seconds as f64 / base_seconds as f64).log2().ceil() as usize + 2
}

/// The gateway's tick interval in these tests (`Setup::default`), and how long a healthy
/// model takes to answer (well within the decomposer's timeout).
const INTERVAL: Duration = Duration::from_millis(200);
const ANSWER: Duration = Duration::from_secs(1);

fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as u64)
}

/// What the fake model saw from its first request on, judged without the gateway's own
/// counters: the first request goes alone (a probe, or the one call of a provider in
/// doubt); once it is answered every other card of `cards` is sent together (all before
/// the first of them could be answered, so not one at a time), within two ticks of that
/// answer (with a second more for a loaded machine).
fn sent_together_after(requests: &[RecordedRequest], cards: &[TaskId]) {
    let first_request = requests.first().expect("a first request");
    let firsts: Vec<u64> = cards
        .iter()
        .filter(|c| first_request.task_id.as_deref() != Some(c.as_str()))
        .map(|c| {
            let sent = requests.iter().find(|r| r.task_id.as_deref() == Some(c.as_str()));
            sent.unwrap_or_else(|| panic!("{c} was never sent"))
                .received_at_ms
        })
        .collect();
    let (Some(&first), Some(&last)) = (firsts.iter().min(), firsts.iter().max()) else {
        return;
    };
    let answer = ANSWER.as_millis() as u64;
    assert!(
        last - first < answer,
        "the cards were sent one after another, over {} ms",
        last - first
    );
    let after = first.saturating_sub(first_request.received_at_ms);
    let bound = answer + 2 * INTERVAL.as_millis() as u64 + 1000;
    assert!(
        after <= bound,
        "the cards went {after} ms after the first request, more than two ticks past its answer"
    );
}

fn triage_cards(b: &GatewayBoard, n: usize, prefix: &str) -> Vec<TaskId> {
    (0..n)
        .map(|i| b.create(&[&format!("{prefix} {i}"), "--triage"]))
        .collect()
}

fn in_triage(b: &GatewayBoard, cards: &[TaskId]) -> usize {
    cards
        .iter()
        .filter(|c| b.task(c).status == Status::Triage)
        .count()
}

/// Fifty cards, a model that fails with `fault` for ten base periods, a gateway stopped
/// and restarted mid-outage, then a healthy model.
fn outage(fault: Reply, timeout_secs: u32) {
    const BASE: u64 = 1;
    const OUTAGE: u64 = 10;
    let mut b = GatewayBoard::new(Setup {
        kanban_extra: "  decompose_retry_base_seconds: 1\n",
        transient_retries: 2,
        timeout_secs,
        per_tick: 50,
        concurrency: 50,
        ..Setup::default()
    });
    b.default_reply(Some(fault));
    let cards = triage_cards(&b, 50, "card");
    let started = std::time::Instant::now();
    b.start_gateway();
    b.wait_for("the breaker to open", || b.db().breaker().unwrap().open);
    // A restart mid-outage (stopped as a service manager stops it: SIGTERM, which
    // releases its decomposition leases) sends nothing before the breaker's next probe
    // time. Once two probes have been taken the next one is four base periods away, so
    // the restarted gateway always runs before it. A gateway killed mid-call is the
    // several-gateways suite's host death.
    b.wait_for("the breaker's second probe", || {
        b.db().breaker().unwrap().opens >= 3
    });
    b.kanban_ok(&["gateway", "stop"]);
    b.kill_gateway();
    let stopped_ms = now_ms();
    let probe_at_ms = b.db().breaker().unwrap().probe_at.expect("a probe time") as u64 * 1000;
    b.start_gateway();
    let restarted = b.ticks();
    b.wait_for("two ticks of the restarted gateway", || {
        b.ticks() >= restarted + 2
    });
    assert!(
        now_ms() < probe_at_ms,
        "the restart outlasted the probe time, so it proved nothing"
    );
    b.wait_for("the probe time", || now_ms() >= probe_at_ms);
    assert!(b.gateway_alive(), "the restarted gateway died");
    let early: Vec<u64> = b
        .fake
        .requests()
        .iter()
        .map(|r| r.received_at_ms)
        .filter(|at| (stopped_ms..probe_at_ms).contains(at))
        .collect();
    assert!(early.is_empty(), "requests before the probe time: {early:?}");
    let left = OUTAGE.saturating_sub(started.elapsed().as_secs());
    std::thread::sleep(std::time::Duration::from_secs(left));
    let during = b.fake.requests().len();
    let bound = outage_bound(OUTAGE, BASE);
    assert!(
        during <= bound,
        "{during} requests during the outage, bound {bound}"
    );
    for card in &cards {
        let task = b.task(card);
        assert!(
            !task.decompose_parked && task.decompose_failures == 0,
            "{card} was charged"
        );
    }
    b.default_reply(Some(Reply::delayed(ANSWER, Reply::text(gateway_board::SINGLE))));
    let healed = b.fake.requests().len();
    b.wait_for("the breaker to close", || !b.db().breaker().unwrap().open);
    b.wait_for("every card sent", || {
        let sent: std::collections::BTreeSet<String> = b.fake.requests()[healed..]
            .iter()
            .filter_map(|r| r.task_id.clone())
            .collect();
        cards.iter().all(|c| sent.contains(c.as_str()))
    });
    sent_together_after(&b.fake.requests()[healed..], &cards);
    b.wait_for("every card decomposed", || in_triage(&b, &cards) == 0);
    // Every request, probes included, is one row. A row more is a request the stop cut
    // off before it reached the model: billed, never answered, so still `sent`.
    let rows = b.db().llm_calls(None).unwrap();
    let requests = b.fake.requests().len();
    let unanswered = rows.iter().filter(|r| r.outcome == LlmOutcome::Sent).count();
    assert!(
        requests <= rows.len() && rows.len() <= requests + unanswered,
        "{} rows ({unanswered} never answered) for {requests} requests",
        rows.len()
    );
    let log = b.gateway_log();
    assert_eq!(log.matches("the model provider is failing").count(), 1, "{log}");
    assert_eq!(
        log.matches("the model provider answers again").count(),
        1,
        "{log}"
    );
    let events = b.snapshot().events;
    assert_eq!(events.iter().filter(|e| e.kind == "breaker_opened").count(), 1);
    assert_eq!(events.iter().filter(|e| e.kind == "breaker_closed").count(), 1);
    b.kill_gateway();
}

#[test]
fn an_outage_of_http_500_costs_a_logarithmic_number_of_requests_and_parks_nobody() {
    outage(Reply::error(500, "upstream down"), 5);
}

#[test]
fn an_outage_of_hangs_behaves_the_same() {
    outage(Reply::Hang, 2);
}

#[test]
fn an_outage_of_429_with_retry_after_behaves_the_same() {
    outage(
        Reply::Error {
            status: 429,
            message: "slow down".into(),
            retry_after: Some(1),
        },
        5,
    );
}

#[test]
fn one_card_that_always_fails_is_parked_without_stalling_the_healthy_ones() {
    let mut b = GatewayBoard::new(Setup {
        kanban_extra: "  decompose_retry_base_seconds: 1\n  decompose_failure_limit: 3\n",
        per_tick: 30,
        concurrency: 30,
        ..Setup::default()
    });
    let healthy = triage_cards(&b, 20, "healthy");
    let mut bad = Vec::new();
    for i in 0..3 {
        let title = format!("malformed {i}");
        b.reply(&title, Reply::text("no JSON here"));
        bad.push(b.create(&[&title, "--triage"]));
    }
    b.reply("always 500", Reply::error(500, "this card breaks the provider"));
    bad.push(b.create(&["always 500", "--triage"]));
    b.default_reply(Some(Reply::delayed(ANSWER, Reply::text(gateway_board::SINGLE))));
    b.start_gateway();
    // The first call goes alone (the provider is in doubt until it answers); then every
    // healthy card is sent together, the bad ones among them failing on the side.
    b.wait_for("every healthy card sent", || {
        healthy.iter().all(|c| b.bills(c) >= 1)
    });
    sent_together_after(&b.fake.requests(), &healthy);
    b.wait_for("every healthy card decomposed", || in_triage(&b, &healthy) == 0);
    b.wait_for("the four bad cards parked", || {
        bad.iter().all(|c| b.task(c).decompose_parked)
    });
    for card in &bad {
        let bills = b.bills(card);
        assert!(bills <= 3, "{card}: {bills} requests");
    }
    let events = b.snapshot().events;
    assert!(
        !events.iter().any(|e| e.kind == "breaker_opened"),
        "the breaker opened"
    );
    b.kill_gateway();
}

#[test]
fn a_401_holds_every_request_until_the_config_changes() {
    let mut b = GatewayBoard::new(Setup {
        kanban_extra: "  decompose_retry_base_seconds: 1\n",
        ..Setup::default()
    });
    b.default_reply(Some(Reply::error(401, "invalid key")));
    let cards = triage_cards(&b, 3, "card");
    b.start_gateway();
    b.wait_for("the breaker to open", || b.db().breaker().unwrap().open);
    let sent = b.fake.requests().len();
    assert_eq!(sent, 1, "one 401 is enough");
    b.default_reply(None);
    let seen = b.ticks();
    b.wait_for("ten more ticks", || b.ticks() >= seen + 10);
    assert_eq!(
        b.fake.requests().len(),
        sent,
        "a request before the config changed"
    );
    let config = b.path().join("config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("timeout: 5", "timeout: 6")).unwrap();
    b.kanban_ok(&["gateway", "reload"]);
    b.wait_for("every card decomposed", || in_triage(&b, &cards) == 0);
    assert!(!b.db().breaker().unwrap().open);
    b.kill_gateway();
}

#[test]
fn a_request_ceiling_stops_automatic_decomposition_and_over_budget_is_on_record() {
    let mut b = GatewayBoard::new(Setup {
        decomposer_extra: "    max_requests_per_day: 5\n",
        per_tick: 20,
        concurrency: 20,
        ..Setup::default()
    });
    let cards = triage_cards(&b, 20, "card");
    b.start_gateway();
    b.wait_for("five cards decomposed", || in_triage(&b, &cards) == 15);
    let seen = b.ticks();
    b.wait_for("five more ticks", || b.ticks() >= seen + 5);
    b.kill_gateway();
    assert_eq!(b.fake.requests().len(), 5, "exactly the ceiling");
    let log = b.gateway_log();
    assert_eq!(log.matches("spend ceiling reached").count(), 1, "{log}");
    let events = b.snapshot().events;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == "spend_ceiling_reached")
            .count(),
        1
    );

    let waiting = cards
        .iter()
        .find(|c| b.task(c).status == Status::Triage)
        .unwrap()
        .clone();
    let refused = b.kanban(&["decompose", waiting.as_str()]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--over-budget"), "{stderr}");
    assert_eq!(b.fake.requests().len(), 5, "a refused call sends nothing");
    b.kanban_ok(&["decompose", waiting.as_str(), "--over-budget"]);
    let rows = b.db().llm_calls(Some(&waiting)).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].over_budget, "the ledger records going past the ceiling");
    let stats: serde_json::Value = serde_json::from_str(&b.kanban_ok(&["stats", "--json"])).unwrap();
    assert_eq!(stats["llm"]["last_24h"]["requests"], 6);
    assert_eq!(stats["llm"]["last_24h"]["over_budget"], 1);
    assert!(stats["llm"]["ceilings"]["reached"]
        .as_str()
        .is_some_and(|r| r.starts_with("max_requests_per_day")));
    let text = b.kanban_ok(&["stats"]);
    assert!(
        text.contains("6 of 5 requests in the last 24 h: reached"),
        "{text}"
    );
}

/// A token ceiling counts tokens in and out, and a cost ceiling both prices: each side of
/// the bill alone stops automatic decomposition at the request that reaches it. One call
/// at a time, so the ceiling is read after every answer.
#[test]
fn token_and_cost_ceilings_are_reached_by_either_side_of_the_bill() {
    let usage = |prompt_tokens, completion_tokens| Usage {
        prompt_tokens,
        completion_tokens,
    };
    let cases = [
        (
            "    max_tokens_per_day: 200\n",
            usage(100, 0),
            "max_tokens_per_day",
        ),
        (
            "    max_tokens_per_day: 200\n",
            usage(0, 100),
            "max_tokens_per_day",
        ),
        (
            "    max_cost_per_day: 2\n    price_per_million_input: 1000000\n",
            usage(1, 0),
            "max_cost_per_day",
        ),
        (
            "    max_cost_per_day: 2\n    price_per_million_output: 1000000\n",
            usage(0, 1),
            "max_cost_per_day",
        ),
    ];
    for (ceiling, usage, key) in cases {
        let case = format!("{key} with {usage:?}");
        let mut b = GatewayBoard::new(Setup {
            decomposer_extra: ceiling,
            per_tick: 1,
            concurrency: 1,
            ..Setup::default()
        });
        b.default_reply(Some(Reply::Text {
            content: gateway_board::SINGLE.to_owned(),
            usage: Some(usage),
        }));
        let cards = triage_cards(&b, 4, "card");
        b.start_gateway();
        b.wait_for("the ceiling to be reached, or every card decomposed", || {
            let events = b.snapshot().events;
            events.iter().any(|e| e.kind == "spend_ceiling_reached") || in_triage(&b, &cards) == 0
        });
        let seen = b.ticks();
        b.wait_for("five more ticks", || b.ticks() >= seen + 5);
        b.kill_gateway();
        assert_eq!(
            b.fake.requests().len(),
            2,
            "{case}: the second request reaches the ceiling"
        );
        assert_eq!(in_triage(&b, &cards), 2, "{case}");
        let events = b.snapshot().events;
        let reached: Vec<&str> = events
            .iter()
            .filter(|e| e.kind == "spend_ceiling_reached")
            .filter_map(|e| e.payload["ceiling"].as_str())
            .collect();
        assert!(
            reached.len() == 1 && reached[0].starts_with(key),
            "{case}: {reached:?}"
        );
    }
}
