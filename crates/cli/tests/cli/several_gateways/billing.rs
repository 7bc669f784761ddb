//! Billed once across gateways: every gateway tries the same triage cards at the same
//! moment, and the model is asked about each card once. The test holds a lock on the
//! decomposition leases that lets reads through and makes every lease write wait, so
//! each gateway reads the cards as free and is seen (in `pg_locks`) waiting to lease
//! one before any lease exists; released, the lease decides who calls. The model takes
//! a second a reply, so the other gateways tick over the cards while a call is out.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use board_core::{BoardReads, LlmLedger, Status};
use fake_llm::Reply;
use postgres::{Client, NoTls};

use super::{seed, Shape, SharedBoard, ONE_STEP};
use crate::scratch_schema::server_url;

const GATEWAYS: usize = 3;
const CARDS: usize = 6;

/// The `application_name`s of the sessions waiting for a lock on the board's
/// decomposition leases.
fn waiting_to_lease(watcher: &mut Client, schema: &str) -> BTreeSet<String> {
    let sql = format!(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE NOT l.granted AND l.locktype = 'relation'
           AND l.relation = '{schema}.decomposition_leases'::regclass"
    );
    let rows = watcher.query(&sql, &[]).unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

#[test]
fn every_card_is_billed_once_though_every_gateway_tries_it_at_once() {
    let shape = Shape {
        password: None,
        gateways: GATEWAYS,
        max_spawn: 0,
        claim_ttl_seconds: 30,
        worker: "true",
        apart: false,
        extra: "",
        worker_extra: "",
    };
    let mut b = SharedBoard::new(&shape);
    b.fake
        .respond_with(|_| Reply::delayed(Duration::from_secs(1), Reply::text(ONE_STEP)));
    let cards = seed(&b, 0, CARDS);
    let mut holder = Client::connect(&server_url(), NoTls).unwrap();
    let mut lock = holder.transaction().unwrap();
    let table = format!("{}.decomposition_leases", b.schema);
    lock.batch_execute(&format!("LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE"))
        .unwrap();
    for n in 0..GATEWAYS {
        b.launch(n);
    }
    let gateways: BTreeSet<String> = (0..GATEWAYS)
        .map(|n| format!("kanban pid {}", b.pid(n)))
        .collect();
    let mut watcher = Client::connect(&server_url(), NoTls).unwrap();
    b.wait_for("every gateway to wait to lease a card", || {
        waiting_to_lease(&mut watcher, &b.schema).is_superset(&gateways)
    });
    lock.rollback().unwrap();
    b.wait_for("every card decomposed", || {
        cards
            .iter()
            .all(|c| b.store.get(c).unwrap().status != Status::Triage)
    });

    let mut bills: BTreeMap<String, usize> = BTreeMap::new();
    for request in b.fake.requests() {
        *bills.entry(request.task_id.unwrap_or_default()).or_default() += 1;
    }
    let once: BTreeMap<String, usize> = cards.iter().map(|c| (c.to_string(), 1)).collect();
    assert_eq!(bills, once, "requests per card");
    assert_eq!(
        b.store.llm_calls(None).unwrap().len(),
        CARDS,
        "one ledger row per card"
    );
    for n in 0..GATEWAYS {
        assert!(b.alive(n), "gateway {n} died:\n{}", b.gateway_log(n));
    }
}
