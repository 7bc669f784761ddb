//! Gateways on separate hosts (`crate::host_rig`: network, PID and mount namespaces joined
//! to the machine by veth pairs) sharing one PostgreSQL board: the claims of this suite
//! where hosts are really apart. Inside each host pids restart at 1, so the same pid
//! numbers name different workers on every host. Runs as root (CI does); `cargo xtask
//! hosts` runs it alone.

use std::collections::{BTreeMap, BTreeSet};

use board_core::{DispatchQueue, Outcome};

use super::{done_once, seed, steady_state, Shape, SharedBoard, QUICK};

/// Three hosts, each its gateway's, on quick workers.
const APART: Shape = Shape {
    password: None,
    gateways: 3,
    max_spawn: 4,
    claim_ttl_seconds: 30,
    worker: QUICK,
    apart: true,
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

/// Tasks of `host` running now.
fn running_on(b: &SharedBoard, host: &str) -> usize {
    let running = b.store.running().unwrap();
    running.iter().filter(|t| t.worker_host() == Some(host)).count()
}

/// Three hosts on short leases at work on 300 tasks, 30 of them triage cards, once host-0
/// runs workers.
fn busy_hosts() -> SharedBoard {
    let mut b = SharedBoard::new(&APART_SHORT_LEASES);
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
    b.wait_for("300 tasks done", || b.all_done(300));
    let snapshot = b.snapshot();
    let by_host = done_once(&snapshot);
    eprintln!("completed runs by host: {by_host:?}");
    // The runs the dead host left open were ended by the others once their leases
    // lapsed, and their tasks done again elsewhere.
    let left: Vec<_> = snapshot
        .runs
        .iter()
        .filter(|r| r.worker_host.as_deref() == Some("host-0") && r.outcome != Some(Outcome::Completed))
        .collect();
    assert!(!left.is_empty(), "host-0 died with no run open");
    for run in left {
        assert_eq!(run.outcome, Some(Outcome::Stale), "{run:?}");
    }
    for n in 1..3 {
        assert!(b.alive(n), "host-{n}'s gateway died:\n{}", b.gateway_log(n));
    }
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
    for n in 1..3 {
        assert!(b.alive(n), "host-{n}'s gateway died:\n{}", b.gateway_log(n));
        b.hosts[n].kill();
    }
    seed(&b, 10, 0);
    b.wait_for("host-0 alone to do 10 more", || b.all_done(310));
    assert!(b.alive(0), "host-0's gateway died:\n{}", b.gateway_log(0));
    let snapshot = b.snapshot();
    let by_host = done_once(&snapshot);
    eprintln!("completed runs by host: {by_host:?}");
    // Every run not completed ended stale: host-0's, and any of a host whose tick waited
    // out the locks of host-0's session (ended by the server after
    // board_postgres::IDLE_IN_TRANSACTION) past a lease as short as this test's.
    let ended: Vec<_> = snapshot
        .runs
        .iter()
        .filter(|r| r.outcome != Some(Outcome::Completed))
        .collect();
    for run in &ended {
        assert_eq!(run.outcome, Some(Outcome::Stale), "{run:?}");
    }
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
