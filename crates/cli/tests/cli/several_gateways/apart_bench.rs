//! The hosts benchmark, `cargo xtask bench --only hosts` (ignored by the test run: a
//! measurement, not a check): on the host rig, the throughput of 1, 2 and 3 hosts on one
//! board with workers that only report done (on 2 cores this shows that hosts do not
//! stall each other), and the time from a host's death until each task it was running
//! runs elsewhere. Prints one line, `HOSTS_BENCH {json}`, for xtask to read.
//! `KANBAN_BENCH_SMALL=1`: a quick check of the harness, not a measurement.

use std::time::Instant;

use board_core::{BoardReads, DispatchQueue, Status, TaskId};
use serde_json::json;

use super::{seed, Shape, SharedBoard, QUICK};

/// The lease of the death scenario, and the tick of every gateway (the shared config's
/// `dispatch_interval_seconds`).
const LEASE_SECONDS: i64 = 4;
const TICK_SECONDS: f64 = 0.2;

fn shape(hosts: usize) -> Shape {
    Shape {
        password: None,
        gateways: hosts,
        max_spawn: 4,
        claim_ttl_seconds: LEASE_SECONDS,
        worker: QUICK,
        apart: true,
        extra: "",
        worker_extra: "",
    }
}

/// Tasks a second, `tasks` tasks seeded before `hosts` gateways are launched at once,
/// until every task is done.
fn throughput(hosts: usize, tasks: usize) -> f64 {
    let mut b = SharedBoard::new(&shape(hosts));
    seed(&b, tasks, 0);
    let start = Instant::now();
    for n in 0..hosts {
        b.launch(n);
    }
    b.wait_for("every task done", || b.all_done(tasks));
    tasks as f64 / start.elapsed().as_secs_f64()
}

/// Seconds from host-0's death, with runs open, until each of its tasks has been claimed
/// again by another host (or is done).
fn death_to_elsewhere(tasks: usize) -> f64 {
    let slow = Shape {
        worker: "sleep 0.5; kanban complete --result done",
        ..shape(3)
    };
    let mut b = SharedBoard::new(&slow);
    seed(&b, tasks, 0);
    for n in 0..3 {
        b.start(n);
    }
    let on_host_0 = |b: &SharedBoard| -> Vec<(TaskId, i64)> {
        let running = b.store.running().unwrap();
        let ours = running.into_iter().filter(|t| t.worker_host() == Some("host-0"));
        ours.filter_map(|t| Some((t.id.clone(), t.lease?.run_id)))
            .collect()
    };
    b.wait_for("host-0 to run workers", || on_host_0(&b).len() >= 2);
    let theirs = on_host_0(&b);
    b.hosts[0].kill();
    let died = Instant::now();
    b.wait_for("host-0's tasks to run elsewhere", || {
        theirs.iter().all(|(id, run)| {
            let task = b.store.get(id).unwrap();
            task.status == Status::Done || task.lease.is_some_and(|l| l.run_id != *run)
        })
    });
    died.elapsed().as_secs_f64()
}

#[test]
#[ignore = "a benchmark: cargo xtask bench --only hosts"]
fn hosts_bench() {
    let small = std::env::var_os("KANBAN_BENCH_SMALL").is_some();
    let (tasks, runs) = if small { (30, 1) } else { (300, 3) };
    let mut throughputs = serde_json::Map::new();
    for hosts in 1..=3 {
        let samples: Vec<f64> = (0..runs).map(|_| throughput(hosts, tasks)).collect();
        throughputs.insert(hosts.to_string(), json!(samples));
    }
    let deaths: Vec<f64> = (0..runs).map(|_| death_to_elsewhere(tasks.min(60))).collect();
    let figures = json!({
        "tasks": tasks,
        "throughput": throughputs,
        "death_to_elsewhere": deaths,
        "lease_seconds": LEASE_SECONDS,
        "tick_seconds": TICK_SECONDS,
    });
    println!("HOSTS_BENCH {figures}");
}
