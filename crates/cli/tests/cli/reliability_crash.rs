//! Reliability: crash consistency. The gateway is SIGKILLed at random points while it
//! decomposes cards, claims tasks, reaps workers and reclaims runs, and CLI writers
//! (creates, manual decompositions, completions, reclaims, dispatcher passes) are
//! SIGKILLed twice a round: once inside a write transaction (held open by the store's
//! debug-only `KANBAN_TEST_PAUSE_BEFORE_COMMIT_MS`) and once after a random delay.
//! Every kill is counted by whether it hit a running process. After every kill the
//! board satisfies every invariant of docs/board.md#invariants and `check_step` across the kill, and
//! holds no half-written decomposition and no event without its state change; every
//! run a killed process left open is adopted or reclaimed by the next gateway.
//!
//! 20 rounds by default; `cargo xtask soak` sets `KANBAN_SOAK_KILLS=200`.

#[path = "gateway_board/check_board_mutations.rs"]
mod check_board_mutations;
use crate::gateway_board;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::{BoardReads, BoardSnapshot, EventFilter, RunId, Status, TaskId};
use fake_llm::Reply;
use gateway_board::{check_board, worker_profile, GatewayBoard, Setup};

/// The store's test pause, and the line it prints once it holds the write lock.
const PAUSE: &str = "KANBAN_TEST_PAUSE_BEFORE_COMMIT_MS";
const PAUSED: &str = "before a commit";

fn rounds() -> usize {
    std::env::var("KANBAN_SOAK_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(20)
}

/// xorshift64*: random kill points without a dependency.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let seed = std::env::var("KANBAN_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(nanos | 1);
        eprintln!("seed {seed} (KANBAN_CRASH_SEED={seed} repeats the choices)");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A fan-out of four with sibling links (0 -> 2, 1 -> 3), children for real workers.
const FANOUT: &str = r#"{"fanout": true, "rationale": "four", "tasks": [
    {"title": "a", "body": "a", "assignee": "quick", "parents": []},
    {"title": "b", "body": "b", "assignee": "slow", "parents": []},
    {"title": "c", "body": "c", "assignee": "quick", "parents": [0]},
    {"title": "d", "body": "d", "assignee": "crasher", "parents": [1]}]}"#;

/// What the kills hit.
#[derive(Default, Debug)]
struct Tally {
    gateway_kills: usize,
    /// Writers killed while paused inside a write transaction.
    mid_transaction: usize,
    /// Writers that finished without reaching a write (a refusal, say).
    no_write: usize,
    /// Random-delay writers still running when killed, and those already done.
    random_running: usize,
    random_finished: usize,
    /// Runs left open when a gateway started, by what became of them by its first
    /// tick: adopted, released because the worker was gone, ended by the worker.
    adopted: usize,
    released: usize,
    finished: usize,
    /// Claimed but never given a worker: only an expiring lease can free them.
    awaiting_lease: BTreeSet<(TaskId, RunId)>,
}

fn last_event_id(b: &GatewayBoard) -> i64 {
    let Ok(db) = board_sqlite::SqliteStore::open_read_only(b.db_path()) else {
        return 0;
    };
    let filter = EventFilter {
        after_id: 0,
        ..EventFilter::default()
    };
    db.events(&filter).map_or(0, |e| e.last().map_or(0, |e| e.id))
}

/// The board now, checked on its own and as one step on from `before`.
fn checked(b: &GatewayBoard, before: &BoardSnapshot, when: &str) -> BoardSnapshot {
    let after = b.snapshot();
    let broken = check_board(&after).err().or_else(|| {
        board_core::check_step(before, &after)
            .err()
            .map(|v| v.to_string())
    });
    if let Some(broken) = broken {
        panic!("after {when}: {broken}\ngateway log:\n{}", b.gateway_log());
    }
    after
}

/// Starts a gateway and shows that every run open before it started is, after its first
/// tick, closed, adopted (the log names the task and the same pid), or never had a
/// worker (left to its lease).
fn start_and_check_adoption(b: &mut GatewayBoard, tally: &mut Tally) {
    let before = b.snapshot();
    let log_from = b.gateway_log().len();
    b.start_gateway();
    let log = b.gateway_log()[log_from..].to_owned();
    let after = b.snapshot();
    for run in before.runs.iter().filter(|r| r.is_open()) {
        let now = after
            .runs
            .iter()
            .find(|r| r.id == run.id)
            .expect("runs are never deleted");
        if !now.is_open() {
            let released = after.events.iter().any(|e| {
                e.run_id == Some(run.id)
                    && e.kind == "reclaimed"
                    && e.payload["reason"] == "its worker is gone"
            });
            if released {
                tally.released += 1;
            } else {
                tally.finished += 1;
            }
            continue;
        }
        match run.worker_pid {
            Some(pid) => {
                let line = format!("adopted a live worker task={} pid={pid}", run.task_id);
                assert!(
                    log.contains(&line),
                    "run {} of {} (pid {pid}) was left open, neither adopted nor reclaimed:\n{log}",
                    run.id,
                    run.task_id
                );
                tally.adopted += 1;
            }
            None => {
                tally.awaiting_lease.insert((run.task_id.clone(), run.id));
            }
        }
    }
}

/// A CLI writer to kill: work of every kind, on tasks in the states it needs.
fn writer_args(rng: &mut Rng, snapshot: &BoardSnapshot, name: &str) -> Vec<String> {
    let pick = |status: Status| {
        snapshot
            .tasks
            .iter()
            .filter(|t| t.status == status)
            .map(|t| t.id.to_string())
            .next()
    };
    let create = || vec!["create".to_owned(), name.to_owned()];
    let with = |verb: &str, id: String, extra: &[&str]| {
        let mut args = vec![verb.to_owned(), id];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    match rng.below(6) {
        0 => create(),
        1 => pick(Status::Triage).map_or_else(create, |id| with("decompose", id, &[])),
        2 => pick(Status::Running).map_or_else(create, |id| with("reclaim", id, &[])),
        3 => pick(Status::Ready).map_or_else(create, |id| with("complete", id, &["--result", "by hand"])),
        4 => pick(Status::Todo).map_or_else(create, |id| {
            vec!["create".to_owned(), name.to_owned(), "--parent".to_owned(), id]
        }),
        _ => vec!["dispatch".to_owned()],
    }
}

fn spawn_writer(b: &GatewayBoard, args: &[&str], pause_ms: u64, stderr: Stdio) -> Child {
    b.command(args)
        .env(PAUSE, pause_ms.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// SIGKILLs `writer` if it is still running (then reaps it); returns whether it was.
fn sigkill_if_running(writer: &mut Child) -> bool {
    let running = writer.try_wait().unwrap().is_none();
    if running {
        writer.kill().expect("SIGKILL the writer");
    }
    writer.wait().unwrap();
    running
}

/// Runs `args` with the store's pause and SIGKILLs it once it says it holds the write
/// lock with its changes uncommitted. Returns whether it got that far.
fn kill_inside_a_transaction(b: &GatewayBoard, args: &[&str]) -> bool {
    let mut writer = spawn_writer(b, args, 20_000, Stdio::piped());
    let (tx, rx) = mpsc::channel();
    let stderr = writer.stderr.take().unwrap();
    // Detached: a worker spawned by `dispatch` could hold the pipe open after the kill.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "`kanban {}` neither paused nor exited in 30 s",
            args.join(" ")
        );
        if rx
            .recv_timeout(Duration::from_millis(10))
            .is_ok_and(|line| line.contains(PAUSED))
        {
            break;
        }
        if writer.try_wait().unwrap().is_some() {
            return false;
        }
    }
    assert!(
        sigkill_if_running(&mut writer),
        "`kanban {}` exited during a 20 s pause",
        args.join(" ")
    );
    true
}

/// Runs `args` and SIGKILLs it after `delay`; returns whether it was still running.
fn kill_after(b: &GatewayBoard, args: &[&str], delay: Duration) -> bool {
    let mut writer = spawn_writer(b, args, 30, Stdio::null());
    std::thread::sleep(delay);
    sigkill_if_running(&mut writer)
}

fn status_of(snapshot: &BoardSnapshot, title: &str) -> Option<Status> {
    snapshot.tasks.iter().find(|t| t.title == title).map(|t| t.status)
}

#[test]
fn the_board_survives_sigkills_of_the_gateway_and_of_cli_writers() {
    let rounds = rounds();
    let mut rng = Rng::seeded();
    let profiles = [
        worker_profile("quick", "kanban heartbeat; kanban complete --result ok"),
        worker_profile("slow", "sleep 1; kanban heartbeat; kanban complete --result slow"),
        worker_profile("crasher", "exit 3"),
    ]
    .concat();
    let mut b = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 6,
        // A run claimed by a process killed before it started a worker is freed only
        // when its lease expires, and counts as a failure: a gateway killed between a
        // tick's claims and its spawns costs each claimed task one, so the limit leaves
        // room for a task to be caught that way more than once. A card whose gateway was
        // killed mid-call is retried under the failure policy, here a second later.
        kanban_extra: "  failure_limit: 4\n  claim_ttl_seconds: 3\n  decompose_retry_base_seconds: 1\n  decompose_failure_limit: 20\n",
        ..Setup::default()
    });
    for i in 0..4 {
        b.reply(
            &format!("fan {i}"),
            Reply::delayed(Duration::from_millis(50 * i), Reply::text(FANOUT)),
        );
    }
    let started = Instant::now();
    let mut tally = Tally::default();
    for round in 0..rounds {
        // New work every round: triage cards to decompose, ready tasks to run.
        b.create(&[&format!("fan {}", round % 4), "--triage"]);
        b.create(&[&format!("quick {round}"), "--assignee", "quick"]);
        b.create(&[&format!("slow {round}"), "--assignee", "slow"]);
        let before = b.snapshot();
        start_and_check_adoption(&mut b, &mut tally);
        // Kill once the board has moved on by a random number of events (or after a
        // short while, when it has nothing left to do).
        let target = last_event_id(&b) + 1 + rng.below(25) as i64;
        let deadline = Instant::now() + Duration::from_millis(300 + rng.below(700));
        while last_event_id(&b) < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        b.sigkill_running_gateway();
        tally.gateway_kills += 1;
        let before = checked(&b, &before, &format!("gateway kill {round}"));

        let name = format!("killed in a transaction {round}");
        let args = writer_args(&mut rng, &before, &name);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let what = format!("`kanban {}` in round {round}", args.join(" "));
        let paused = kill_inside_a_transaction(&b, &args);
        let before = checked(&b, &before, &format!("killing {what} inside a transaction"));
        if paused {
            tally.mid_transaction += 1;
            if args.contains(&name.as_str()) {
                assert_eq!(status_of(&before, &name), None, "{what}: a killed create landed");
            }
        } else {
            tally.no_write += 1;
        }

        let args = writer_args(&mut rng, &before, &format!("killed at random {round}"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let what = format!("`kanban {}` in round {round}", args.join(" "));
        if kill_after(&b, &args, Duration::from_micros(rng.below(60_000))) {
            tally.random_running += 1;
        } else {
            tally.random_finished += 1;
        }
        checked(&b, &before, &format!("killing {what} at random"));
    }
    // A last gateway runs the board to rest: it adopts or reclaims what was left, and
    // every run ends (those without a worker when their lease expires).
    let before = b.snapshot();
    start_and_check_adoption(&mut b, &mut tally);
    let last = rounds - 1;
    let at_rest = |s: &BoardSnapshot| {
        !s.tasks.iter().any(|t| t.status == Status::Running)
            && (0..rounds).all(|r| {
                status_of(s, &format!("quick {r}")) == Some(Status::Done)
                    && status_of(s, &format!("slow {r}")) == Some(Status::Done)
            })
    };
    b.wait_for("every round's work to be done and every run to end", || {
        at_rest(&b.snapshot())
    });
    b.sigkill_running_gateway();
    let after = checked(&b, &before, "the final gateway");
    for (task, run) in &tally.awaiting_lease {
        let ended = after
            .runs
            .iter()
            .find(|r| r.id == *run)
            .is_some_and(|r| !r.is_open());
        assert!(ended, "run {run} of {task}, left without a worker, never ended");
    }
    let count = |s: Status| after.tasks.iter().filter(|t| t.status == s).count();
    let decomposed = after.events.iter().filter(|e| e.kind == "decomposed").count();
    eprintln!(
        "{rounds} rounds in {:?}: {tally:?}\n{} tasks ({} done), {} runs, {decomposed} decompositions, {} events",
        started.elapsed(),
        after.tasks.len(),
        count(Status::Done),
        after.runs.len(),
        after.events.len()
    );
    assert_eq!(
        tally.gateway_kills, rounds,
        "every gateway kill hit a running gateway"
    );
    assert!(
        tally.mid_transaction >= rounds / 2,
        "only {} of {rounds} writers were killed inside a transaction",
        tally.mid_transaction
    );
    assert!(
        tally.random_running >= rounds / 4,
        "only {} of {rounds} random kills hit a running writer",
        tally.random_running
    );
    assert!(
        tally.adopted > 0 && tally.released > 0,
        "a restarted gateway never had a live worker to adopt or a dead one to release"
    );
    assert!(
        status_of(&after, &format!("quick {last}")) == Some(Status::Done)
            && count(Status::Done) >= 2 * rounds
            && decomposed >= rounds / 2,
        "the board did every round's work"
    );
    assert!(!b.gateway_log().contains("panicked"), "{}", b.gateway_log());
}
