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

#[test]
fn a_host_that_dies_mid_run_loses_nothing_and_its_tasks_are_done_once_elsewhere() {
    let mut b = SharedBoard::new(&APART_SHORT_LEASES);
    seed(&b, 270, 30);
    for n in 0..3 {
        b.start(n);
    }
    let running_on = |b: &SharedBoard, host: &str| {
        let running = b.store.running().unwrap();
        running.iter().filter(|t| t.worker_host() == Some(host)).count()
    };
    b.wait_for("host-0 to run workers", || running_on(&b, "host-0") > 0);
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
