//! Reliability (issue 7): eight processes write one board file at once, mixing creates,
//! claims, heartbeats, completions, blocks, unblocks and reclaims, for 5 s (30 s under
//! `cargo xtask soak`, which sets `KANBAN_SOAK_WRITERS_SECS`). No caller ever sees
//! `database is locked`, the invariants hold, and event ids increase per task.
//!
//! The writers are this test binary re-run with `--ignored --exact writer_process`.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::{BlockKind, Completion, NewTask, NoWorkers, Status, Store, StoreError, TaskFilter};
use board_sqlite::{Options, SqliteStore};

const WRITERS: usize = 8;
const DB_VAR: &str = "KANBAN_WRITER_DB";
const SECS_VAR: &str = "KANBAN_SOAK_WRITERS_SECS";

/// xorshift64*: enough randomness for choosing operations, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

#[derive(Default)]
struct Tally {
    ops: HashMap<&'static str, usize>,
    refused: usize,
    locked: Vec<String>,
    other: Vec<String>,
}

impl Tally {
    fn record<T>(&mut self, op: &'static str, result: Result<T, StoreError>) -> Option<T> {
        *self.ops.entry(op).or_default() += 1;
        match result {
            Ok(v) => Some(v),
            Err(StoreError::Refused(_)) => {
                self.refused += 1;
                None
            }
            Err(StoreError::Backend(message)) => {
                let lower = message.to_ascii_lowercase();
                if lower.contains("locked") || lower.contains("busy") {
                    self.locked.push(format!("{op}: {message}"));
                } else {
                    self.other.push(format!("{op}: {message}"));
                }
                None
            }
        }
    }
}

#[test]
#[ignore = "a writer process, started by eight_processes_write_one_board"]
fn writer_process() {
    let Ok(db) = std::env::var(DB_VAR) else {
        panic!("run only as a writer: {DB_VAR} is not set");
    };
    let seconds: f64 = std::env::var(SECS_VAR).unwrap().parse().unwrap();
    let mut rng = Rng(u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut t = Tally::default();
    let store = match SqliteStore::open(&db, &Options::default()) {
        Ok(store) => store,
        Err(e) => {
            println!("OPENFAIL {e}");
            return;
        }
    };
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    // Runs this writer claimed and has not finalised: (task, run).
    let mut mine = Vec::new();
    let mut slowest = Duration::ZERO;
    while Instant::now() < deadline {
        let started = Instant::now();
        match rng.below(10) {
            0 | 1 => {
                let mut request = NewTask::titled(format!("w{} {}", std::process::id(), rng.next()));
                // Sometimes under an existing task, so links and promotion race too.
                if rng.below(3) == 0 {
                    let filter = TaskFilter {
                        limit: Some(50),
                        ..TaskFilter::default()
                    };
                    if let Some(list) = t.record("list", store.list(&filter)) {
                        if !list.is_empty() {
                            request.parents = vec![list[rng.below(list.len())].id.clone()];
                        }
                    }
                }
                t.record("create", store.create(&request, now()));
            }
            2 | 3 => {
                if let Some(ready) = t.record("claimable", store.claimable(16)) {
                    if !ready.is_empty() {
                        let task = &ready[rng.below(ready.len())];
                        if let Some(claim) = t.record("claim", store.claim(&task.id, 900, now())) {
                            mine.push((claim.task.id, claim.run_id));
                        }
                    }
                }
            }
            4 if !mine.is_empty() => {
                let (task, run) = &mine[rng.below(mine.len())];
                t.record("heartbeat", store.heartbeat(task, *run, 900, None, now()));
            }
            5 | 6 if !mine.is_empty() => {
                let (task, run) = mine.swap_remove(rng.below(mine.len()));
                let c = Completion {
                    expected_run_id: Some(run),
                    result: Some("ok".into()),
                    ..Completion::default()
                };
                t.record("complete", store.complete(&task, &c, now()));
            }
            7 if !mine.is_empty() => {
                let (task, run) = mine.swap_remove(rng.below(mine.len()));
                let kind = [None, Some(BlockKind::Capability), Some(BlockKind::Transient)][rng.below(3)];
                t.record(
                    "block",
                    store.block(&task, kind, Some("stuck".into()), Some(run), now()),
                );
            }
            8 => {
                // Reclaim anybody's running task: races the owner's completion.
                if let Some(running) = t.record("running", store.running()) {
                    if !running.is_empty() {
                        let task = &running[rng.below(running.len())];
                        t.record(
                            "reclaim",
                            store.reclaim(&task.id, task.current_run_id, None, &NoWorkers, now()),
                        );
                    }
                }
            }
            _ => {
                let filter = TaskFilter {
                    status: Some(Status::Blocked),
                    ..TaskFilter::default()
                };
                if let Some(blocked) = t.record("list", store.list(&filter)) {
                    if let Some(task) = blocked.first() {
                        t.record("unblock", store.unblock(&task.id, None, now()));
                    }
                }
                t.record("promote", store.promote_ready(now()));
            }
        }
        slowest = slowest.max(started.elapsed());
    }
    let total: usize = t.ops.values().sum();
    for l in &t.locked {
        println!("LOCKED {l}");
    }
    for o in &t.other {
        println!("OTHER {o}");
    }
    println!(
        "STATS ops={total} slowest_ms={} refused={} locked={} other={} {:?}",
        slowest.as_millis(),
        t.refused,
        t.locked.len(),
        t.other.len(),
        t.ops
    );
}

fn writer(db: &std::path::Path, seconds: f64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "writer_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DB_VAR, db)
        .env(SECS_VAR, seconds.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn writer")
}

#[test]
fn eight_processes_write_one_board() {
    let seconds: f64 = std::env::var(SECS_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kanban.db");
    let store = SqliteStore::open(&db, &Options::default()).unwrap();
    for i in 0..20 {
        store
            .create(&NewTask::titled(format!("seed {i}")), now())
            .unwrap();
    }
    let writers: Vec<_> = (0..WRITERS).map(|_| writer(&db, seconds)).collect();
    let (mut ops, mut locked, mut other) = (0, Vec::new(), Vec::new());
    for w in writers {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "writer failed: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stats = stdout
            .lines()
            .find_map(|l| {
                l.find("STATS ")
                    .or_else(|| l.find("OPENFAIL "))
                    .map(|at| &l[at..])
            })
            .unwrap_or_else(|| panic!("a writer printed no stats:\n{stdout}"));
        eprintln!("{stats}");
        assert!(!stats.starts_with("OPENFAIL"), "{stats}");
        let n: usize = stats
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ops="))
            .unwrap()
            .parse()
            .unwrap();
        ops += n;
        locked.extend(
            stdout
                .lines()
                .filter(|l| l.contains("LOCKED "))
                .map(str::to_owned),
        );
        other.extend(stdout.lines().filter(|l| l.contains("OTHER ")).map(str::to_owned));
    }
    assert!(
        locked.is_empty(),
        "`database is locked` reached a caller:\n{}",
        locked.join("\n")
    );
    assert!(other.is_empty(), "storage errors:\n{}", other.join("\n"));
    let snapshot = store.snapshot().unwrap();
    board_core::check_invariants(&snapshot).unwrap();
    let mut last: HashMap<&board_core::TaskId, i64> = HashMap::new();
    for e in &snapshot.events {
        let prev = last.insert(&e.task_id, e.id).unwrap_or(0);
        assert!(e.id > prev, "event {} of {} after {prev}", e.id, e.task_id);
    }
    let runs = snapshot.runs.len();
    eprintln!(
        "{WRITERS} writers x {seconds} s: {ops} operations, {} tasks, {runs} runs, {} events",
        snapshot.tasks.len(),
        snapshot.events.len()
    );
    assert!(
        runs > 0 && ops > WRITERS * 10,
        "the writers did little: {ops} ops"
    );
}
