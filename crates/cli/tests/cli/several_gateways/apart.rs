//! Gateways on separate hosts (`crate::host_rig`: network, PID and mount namespaces joined
//! to the machine by veth pairs) sharing one PostgreSQL board: the claims of this suite
//! where hosts are really apart. Inside each host pids restart at 1, so the same pid
//! numbers name different workers on every host. Faults: a host killed, cut off or
//! paused; a decomposition cut off mid-call; the board's own server restarted
//! (`crate::private_server`). Runs as root (CI does); `cargo xtask hosts` runs it alone.

use std::collections::{BTreeMap, BTreeSet};

use board_core::{
    BoardReads, DispatchQueue, EventFilter, EventKind, LlmLedger, LlmOutcome, Outcome, Run, RunKind, Status,
    TaskId,
};
use fake_llm::Reply;

use crate::private_server::PrivateServer;

use super::{done_once, seed, steady_state, Shape, SharedBoard, ONE_STEP, QUICK};

/// Three hosts, each its gateway's, on quick workers that live long enough for their
/// gateway to record their pids (a worker that completes first keeps none, and on a
/// loaded machine too few pids were left for the hosts' shared numbers to show).
const APART: Shape = Shape {
    password: None,
    gateways: 3,
    max_spawn: 4,
    claim_ttl_seconds: 30,
    worker: "sleep 0.05; kanban complete --result done",
    apart: true,
    extra: "",
    worker_extra: "",
};

/// Three hosts whose workers take a moment, on leases short enough for a test to outlive.
const APART_SHORT_LEASES: Shape = Shape {
    claim_ttl_seconds: 4,
    worker: "sleep 0.3; kanban complete --result done",
    ..APART
};

#[test]
fn three_hosts_do_every_task_once_bill_every_card_once_and_never_mix_their_pids() {
    let snapshot = steady_state(&APART);
    // Every run names its host from its claim on, even one that finished before its
    // worker's pid was recorded.
    for run in &snapshot.runs {
        assert!(run.worker_host.is_some(), "{run:?}");
    }
    // Every run completed: no host signalled, adopted or classified a worker of another
    // host, though the same pid numbers ran workers on several of them.
    for run in &snapshot.runs {
        assert_eq!(run.outcome, Some(Outcome::Completed), "{run:?}");
    }
    let mut hosts_of_pid: BTreeMap<i64, BTreeSet<&str>> = BTreeMap::new();
    for run in &snapshot.runs {
        if let (Some(pid), Some(host)) = (run.worker_pid, run.worker_host.as_deref()) {
            hosts_of_pid.entry(pid).or_default().insert(host);
        }
    }
    let shared = hosts_of_pid.values().filter(|hosts| hosts.len() > 1).count();
    assert!(
        shared > 0,
        "no pid number ran workers on two hosts ({} pids)",
        hosts_of_pid.len()
    );
}

/// Waits for `tasks` tasks to be done, each once; every run not completed (of `host`,
/// or of any) ended stale (by another host, once its lease lapsed): those runs.
fn ended_stale(b: &SharedBoard, tasks: usize, host: Option<&str>) -> Vec<Run> {
    b.wait_for(&format!("{tasks} tasks done"), || b.all_done(tasks));
    let snapshot = b.snapshot();
    let by_host = done_once(&snapshot);
    eprintln!("completed runs by host: {by_host:?}");
    let ended: Vec<Run> = snapshot
        .runs
        .into_iter()
        .filter(|r| host.is_none_or(|h| r.worker_host.as_deref() == Some(h)))
        .filter(|r| r.outcome != Some(Outcome::Completed))
        .collect();
    for run in &ended {
        assert_eq!(run.outcome, Some(Outcome::Stale), "{run:?}");
    }
    each_request_billed_once(b);
    ended
}

/// Every request the model received is one row on the bill, and every card decomposed
/// at most once. A row whose request a fault may have kept from the model (its host cut
/// off, the server restarted) is unanswered (`sent`), or ended without an answer
/// (`connection_error`, `timeout`): rows may exceed the requests by those alone.
fn each_request_billed_once(b: &SharedBoard) {
    let requests = b.fake.requests().len();
    let rows = b.store.llm_calls(None).unwrap();
    let unanswered = [LlmOutcome::Sent, LlmOutcome::ConnectionError, LlmOutcome::Timeout];
    let unanswered = rows.iter().filter(|r| unanswered.contains(&r.outcome)).count();
    assert!(
        requests <= rows.len() && rows.len() <= requests + unanswered,
        "{requests} requests, {} rows ({unanswered} unanswered)",
        rows.len()
    );
    let filter = EventFilter {
        kinds: vec![EventKind::Specified.as_str().to_owned()],
        ..EventFilter::default()
    };
    let mut committed: BTreeMap<TaskId, usize> = BTreeMap::new();
    for event in b.store.events(&filter).unwrap() {
        *committed.entry(event.task_id).or_default() += 1;
    }
    assert!(committed.values().all(|n| *n == 1), "{committed:?}");
}

/// Tasks of `host` running now.
fn running_on(b: &SharedBoard, host: &str) -> usize {
    let running = b.store.running().unwrap();
    running.iter().filter(|t| t.worker_host() == Some(host)).count()
}

/// Three hosts on short leases at work on 300 tasks, 30 of them triage cards, once host-0
/// runs workers.
fn busy_hosts() -> SharedBoard {
    busy_hosts_on(None)
}

/// [`busy_hosts`] on `server`, or on the test server.
fn busy_hosts_on(server: Option<PrivateServer>) -> SharedBoard {
    let mut b = SharedBoard::on(&APART_SHORT_LEASES, server);
    seed(&b, 270, 30);
    for n in 0..3 {
        b.start(n);
    }
    b.wait_for("host-0 to run workers", || running_on(&b, "host-0") > 0);
    b
}

#[test]
fn a_host_that_dies_mid_run_loses_nothing_and_its_tasks_are_done_once_elsewhere() {
    let mut b = busy_hosts();
    b.hosts[0].kill();
    let gateway = b.gateways[0].take().expect("started").wait().unwrap();
    assert!(!gateway.success(), "host-0's gateway ended well: {gateway:?}");
    // The runs the dead host left open were ended by the others once their leases
    // lapsed, and their tasks done again elsewhere.
    let left = ended_stale(&b, 300, Some("host-0"));
    assert!(!left.is_empty(), "host-0 died with no run open");
    for n in 1..3 {
        assert!(b.alive(n), "host-{n}'s gateway died:\n{}", b.gateway_log(n));
    }
}

/// Three hosts on short leases whose work is verified for a moment before it counts.
const APART_VERIFIED: Shape = Shape {
    worker: QUICK,
    worker_extra: "    verify:\n      - [\"sh\", \"-c\", \"sleep 1\"]\n",
    ..APART_SHORT_LEASES
};

/// Tasks of `host` whose verifiers run now.
fn verifying_on(b: &SharedBoard, host: &str) -> usize {
    let running = b.store.running().unwrap();
    let on_host = running.iter().filter(|t| t.worker_host() == Some(host));
    let verifying = on_host.filter(|t| {
        let runs = b.store.runs(&t.id).unwrap();
        runs.last()
            .is_some_and(|r| r.kind == RunKind::Verify && r.ended_at.is_none())
    });
    verifying.count()
}

#[test]
fn a_host_that_dies_mid_verification_loses_no_work_and_each_task_is_verified_once_elsewhere() {
    let mut b = SharedBoard::on(&APART_VERIFIED, None);
    seed(&b, 60, 0);
    for n in 0..3 {
        b.start(n);
    }
    b.wait_for("host-0 to run verifiers", || verifying_on(&b, "host-0") > 0);
    b.hosts[0].kill();
    let gateway = b.gateways[0].take().expect("started").wait().unwrap();
    assert!(!gateway.success(), "host-0's gateway ended well: {gateway:?}");
    b.wait_for("60 tasks done", || b.all_done(60));
    let snapshot = b.snapshot();
    board_core::check_invariants(&snapshot).unwrap();
    let mut verified: BTreeMap<&TaskId, (usize, usize, usize)> = BTreeMap::new();
    for e in &snapshot.events {
        let counts = verified.entry(&e.task_id).or_default();
        match e.kind.as_str() {
            "verified" => counts.0 += 1,
            "completed" => counts.1 += 1,
            "verify_failed" => counts.2 += 1,
            _ => {}
        }
    }
    assert_eq!(verified.len(), 60);
    for (task, counts) in &verified {
        assert_eq!(*counts, (1, 1, 0), "{task}: verified, completed, failed");
    }
    // The verifications host-0 died in ended stale and were done again elsewhere; the
    // work they checked was not redone.
    let cut: Vec<&Run> = snapshot
        .runs
        .iter()
        .filter(|r| r.kind == RunKind::Verify && r.outcome != Some(Outcome::Completed))
        .collect();
    assert!(!cut.is_empty(), "host-0 died with no verification open");
    for run in cut {
        assert_eq!(
            (run.outcome, run.worker_host.as_deref()),
            (Some(Outcome::Stale), Some("host-0"))
        );
        let work_done = snapshot
            .runs
            .iter()
            .filter(|r| r.task_id == run.task_id && r.kind == RunKind::Work)
            .filter(|r| r.outcome == Some(Outcome::Completed))
            .count();
        assert_eq!(work_done, 1, "{}: the verified work was redone", run.task_id);
    }
    for n in 1..3 {
        assert!(b.alive(n), "host-{n}'s gateway died:\n{}", b.gateway_log(n));
    }
}

/// With `done` tasks done, the other hosts (still alive) are killed and 10 more tasks
/// seeded: host-0 alone does them, so it is back at work without a restart.
fn alone_on_host_0(b: &mut SharedBoard, done: usize) {
    for n in 1..3 {
        assert!(b.alive(n), "host-{n}'s gateway died:\n{}", b.gateway_log(n));
        b.hosts[n].kill();
    }
    seed(b, 10, 0);
    b.wait_for("host-0 alone to do 10 more", || b.all_done(done + 10));
    assert!(b.alive(0), "host-0's gateway died:\n{}", b.gateway_log(0));
}

/// How a test cuts a host off from the board for a while.
enum Fault {
    Partition,
    Pause,
}

/// Three hosts at work; host-0 is cut off (`fault`) once it runs workers, for longer than
/// two leases, then brought back. The others end its runs once their leases lapse and do
/// every task once; then, with the others gone, host-0 alone does new work: it rejoined
/// without a restart.
fn cut_off_and_back(fault: Fault) {
    let mut b = busy_hosts();
    match fault {
        Fault::Partition => b.hosts[0].partition(),
        Fault::Pause => b.hosts[0].pause(),
    }
    let cut = std::time::Instant::now();
    let two_leases = std::time::Duration::from_secs(2 * APART_SHORT_LEASES.claim_ttl_seconds as u64);
    b.wait_for("host-0's runs to be ended by the others", || {
        running_on(&b, "host-0") == 0
    });
    b.wait_for("the cut to outlast two leases", || cut.elapsed() >= two_leases);
    match fault {
        Fault::Partition => b.hosts[0].heal(),
        Fault::Pause => b.hosts[0].resume(),
    }
    b.wait_for("300 tasks done", || b.all_done(300));
    alone_on_host_0(&mut b, 300);
    // Every run not completed ended stale: host-0's, and any of a host whose tick waited
    // out the locks of host-0's session (ended by the server after
    // board_postgres::IDLE_IN_TRANSACTION) past a lease as short as this test's.
    let ended = ended_stale(&b, 310, None);
    assert!(
        ended.iter().any(|r| r.worker_host.as_deref() == Some("host-0")),
        "host-0 was cut off with no run open"
    );
}

#[test]
fn a_host_cut_off_longer_than_its_leases_does_no_harm_and_rejoins() {
    cut_off_and_back(Fault::Partition);
}

#[test]
fn a_host_paused_longer_than_its_leases_does_no_harm_and_rejoins() {
    cut_off_and_back(Fault::Pause);
}

/// Host-0's workers hang while its home holds a `hold` file; every other worker takes a
/// moment.
const APART_HOLDING: Shape = Shape {
    worker: "if [ -e \"${KANBAN_WORKSPACE%/workspaces/*}/hold\" ]; then sleep 60; fi; sleep 0.3; kanban complete --result done",
    ..APART_SHORT_LEASES
};

/// Host `n`'s hung workers (its `sleep 60` processes).
fn hung_on(b: &SharedBoard, n: usize) -> usize {
    let hung = |pid: &u32| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\x0060\x00"))
    };
    b.hosts[n].processes().iter().filter(|p| hung(p)).count()
}

/// The fencing rule for live workers: host-0 is cut off with four workers running, longer
/// than two leases, and says so within seconds; the others end its runs and do its
/// tasks. Back, host-0 finds its
/// runs ended without its workers and stops each of them, one log line each, writing
/// nothing of those runs.
#[test]
fn a_host_cut_off_stops_the_workers_whose_runs_were_taken_over_once_it_is_back() {
    let mut b = SharedBoard::new(&APART_HOLDING);
    let hold = b.home(0).join("hold");
    std::fs::write(&hold, "").unwrap();
    seed(&b, 270, 30);
    for n in 0..3 {
        b.start(n);
    }
    b.wait_for("host-0 to run four hung workers", || hung_on(&b, 0) == 4);
    let said_before = b.gateway_log(0).len();
    b.hosts[0].partition();
    let cut = std::time::Instant::now();
    // Its sessions give up on the silent server within seconds, not the kernel's
    // quarter of an hour (one call's wait, then one attempt to connect again), and its
    // log says so.
    b.wait_for("host-0 to say it cannot reach the board", || {
        b.gateway_log(0)[said_before..].contains("tick step failed")
    });
    let noticed = cut.elapsed();
    eprintln!("host-0 noticed the cut after {noticed:?}");
    let connect = board_postgres::Options::default().connect_timeout;
    let bound = board_postgres::SERVER_SILENCE + connect + std::time::Duration::from_secs(5);
    assert!(noticed < bound, "noticed after {noticed:?}");
    let two_leases = std::time::Duration::from_secs(2 * APART_HOLDING.claim_ttl_seconds as u64);
    b.wait_for("host-0's runs to be ended by the others", || {
        running_on(&b, "host-0") == 0
    });
    b.wait_for("the cut to outlast two leases", || cut.elapsed() >= two_leases);
    assert_eq!(hung_on(&b, 0), 4, "kept while cut off");
    std::fs::remove_file(&hold).unwrap();
    b.hosts[0].heal();
    b.wait_for("host-0 to stop its hung workers", || hung_on(&b, 0) == 0);
    let said = b.gateway_log(0).matches("run ended without it").count();
    assert_eq!(said, 4, "one line a worker:\n{}", b.gateway_log(0));
    let lost = ended_stale(&b, 300, Some("host-0"));
    assert!(lost.len() >= 4, "{lost:?}");
    for n in 0..3 {
        assert!(b.alive(n), "host-{n}'s gateway died:\n{}", b.gateway_log(n));
    }
}

/// Hosts whose failed decompositions are retried after a second.
const APART_QUICK_RETRY: Shape = Shape {
    extra: "  decompose_retry_base_seconds: 1\n",
    ..APART
};

/// Decomposition during a partition: host-0's request is at the model when host-0 is cut
/// off. Its lease lapses; another host takes the card over (charging that attempt once)
/// and decomposes it. The card is committed once, each of the two requests is one row on
/// the bill, and host-0, back and at work again, sends nothing more for it.
#[test]
fn a_decomposition_cut_off_mid_call_is_billed_once_and_committed_once_elsewhere() {
    let mut b = SharedBoard::new(&APART_QUICK_RETRY);
    let first = std::sync::atomic::AtomicBool::new(true);
    b.fake.respond_with(move |_| {
        let reply = Reply::text(ONE_STEP);
        match first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            true => Reply::delayed(std::time::Duration::from_secs(8), reply),
            false => reply,
        }
    });
    let card = seed(&b, 0, 1).remove(0);
    b.start(0);
    b.wait_for("host-0's request at the model", || b.fake.requests().len() == 1);
    b.hosts[0].partition();
    b.start(1);
    b.start(2);
    b.wait_for("another host to decompose the card", || {
        b.store.get(&card).unwrap().status != Status::Triage
    });
    b.hosts[0].heal();
    alone_on_host_0(&mut b, 1);
    done_once(&b.snapshot());
    let requests = b.fake.requests();
    assert_eq!(
        requests.len(),
        2,
        "host-0's request and the one after the take-over"
    );
    assert!(requests
        .iter()
        .all(|r| r.task_id.as_deref() == Some(card.as_str())));
    let rows = b.store.llm_calls(Some(&card)).unwrap();
    assert_eq!(rows.len(), 2, "one row a request: {rows:?}");
    let kinds: Vec<String> = b
        .store
        .events(&EventFilter {
            task_id: Some(card.clone()),
            ..EventFilter::default()
        })
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    let count = |kind: EventKind| kinds.iter().filter(|k| **k == kind).count();
    assert_eq!(count(EventKind::Specified), 1, "committed once: {kinds:?}");
    assert_eq!(
        count(EventKind::AutoDecomposeFailed),
        1,
        "the lapsed attempt charged once: {kinds:?}"
    );
}

/// The board's server restarts (a fast shutdown: every session ended, transactions in
/// flight rolled back) under three hosts at work: every task is done once, every request
/// to the model is one row on the bill, and every gateway carries on without a restart.
#[test]
fn a_server_restarted_under_three_hosts_at_work_loses_nothing() {
    let mut b = busy_hosts_on(Some(PrivateServer::start()));
    b.server.as_mut().expect("the board's own server").restart();
    b.wait_for("300 tasks done", || b.all_done(300));
    let by_host = done_once(&b.snapshot());
    eprintln!("completed runs by host: {by_host:?}");
    each_request_billed_once(&b);
    for n in 0..3 {
        assert!(b.alive(n), "host-{n}'s gateway died:\n{}", b.gateway_log(n));
        let log = b.gateway_log(n);
        assert!(
            log.contains("a database session was lost"),
            "host-{n} saw no restart:\n{log}"
        );
    }
    seed(&b, 30, 0);
    b.wait_for("30 more tasks done", || b.all_done(330));
}
