//! Wake-ups (docs/gateway.md#wake-ups): with a 30 s tick, a gateway acts on a task
//! created ready, on a child its parent's completion releases, on a card dropped into
//! triage and on the slot a finished worker frees well within two seconds, on SQLite (the CLI's datagram, the gateway's own
//! writes) and on PostgreSQL (`NOTIFY` in the write's transaction).

use std::sync::Arc;
use std::time::{Duration, Instant};

use board_core::{Outcome, Status, Store, TaskId};
use board_postgres::{Options, PgStore};
use board_sqlite::SqliteStore;

use crate::gateway_board::{worker_profile, GatewayBoard, Setup};
use crate::scratch_schema::{in_schema, server_url, tear_down, terminate_sessions, unique_schema};

/// The tick: nothing in these tests may wait for a second one.
const INTERVAL_SECONDS: f64 = 30.0;
/// How long a wake-up may take, a fifteenth of the tick, for slow debug builds on a
/// busy machine; the benchmark measures the real figure.
const LIMIT: Duration = Duration::from_secs(2);

/// A board with a real gateway, read through a store of its backend.
struct WakeBoard {
    board: GatewayBoard,
    store: Arc<dyn Store>,
    /// The PostgreSQL schema to drop at the end.
    schema: Option<String>,
}

impl WakeBoard {
    fn new(postgres: bool) -> WakeBoard {
        WakeBoard::with_slots(postgres, 4)
    }

    fn with_slots(postgres: bool, max_spawn: usize) -> WakeBoard {
        let mut env = Vec::new();
        let mut pg = None;
        if postgres {
            let base = server_url();
            let schema = unique_schema("kanban_wake");
            let options = Options {
                schema: Some(schema.clone()),
                ..Options::default()
            };
            let store = PgStore::open(&base, &options)
                .unwrap_or_else(|e| panic!("PostgreSQL is unreachable ({e}); set KANBAN_TEST_DATABASE_URL"));
            env.push(("KANBAN_DATABASE_URL".to_owned(), in_schema(&base, &schema)));
            pg = Some((store, schema));
        }
        let profiles = worker_profile("quick", "kanban complete --result ok");
        let board = GatewayBoard::new(Setup {
            env,
            profiles: &profiles,
            max_spawn,
            interval_seconds: INTERVAL_SECONDS,
            ..Setup::default()
        });
        let (store, schema): (Arc<dyn Store>, _) = match pg {
            Some((store, schema)) => (Arc::new(store), Some(schema)),
            None => (
                Arc::new(SqliteStore::open_read_only(board.db_path()).unwrap()),
                None,
            ),
        };
        WakeBoard { board, store, schema }
    }

    /// Whether a worker was started for `id`: its pid is recorded, or it already
    /// completed its run (a worker may report before the gateway records its pid).
    fn spawned(&self, id: &TaskId) -> bool {
        self.store
            .runs(id)
            .unwrap()
            .iter()
            .any(|r| r.worker_pid.is_some() || r.outcome == Some(Outcome::Completed))
    }

    fn status(&self, id: &TaskId) -> Status {
        self.store.get(id).unwrap().status
    }

    /// Polls `done` every 5 ms; returns how long it took, failing past `LIMIT` with the
    /// gateway's log.
    fn within_limit(&self, what: &str, since: Instant, done: impl Fn() -> bool) -> Duration {
        while !done() {
            assert!(
                since.elapsed() < LIMIT,
                "{what} took over {LIMIT:?} with a {INTERVAL_SECONDS} s tick:\n{}",
                self.board.gateway_log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        since.elapsed()
    }

    fn wakeups(&self) -> u64 {
        std::fs::read_to_string(self.board.path().join("gateway.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|status| status["wakeups"].as_u64())
            .unwrap_or(0)
    }
}

impl Drop for WakeBoard {
    fn drop(&mut self) {
        self.board.kill_gateway();
        if let Some(schema) = &self.schema {
            tear_down(self.store.as_ref(), schema);
        }
    }
}

fn wakes_the_gateway(postgres: bool) {
    let mut b = WakeBoard::new(postgres);
    b.board.start_gateway();
    let ticks_at_start = b.board.ticks();

    let start = Instant::now();
    let ready = b.board.create(&["created ready", "--assignee", "quick"]);
    let took = b.within_limit("created ready to spawned", start, || b.spawned(&ready));
    eprintln!("created ready -> spawned: {took:?}");

    let parent = b.board.create(&["parent", "--assignee", "quick"]);
    let parent_arg = parent.to_string();
    let child = b
        .board
        .create(&["child", "--assignee", "quick", "--parent", &parent_arg]);
    b.within_limit("the parent's completion", Instant::now(), || {
        b.status(&parent) == Status::Done
    });
    let completed = Instant::now();
    let took = b.within_limit("parent completed to child spawned", completed, || {
        b.spawned(&child)
    });
    eprintln!("parent completed -> child spawned: {took:?}");

    let start = Instant::now();
    let card = b.board.create(&["dropped into triage", "--triage"]);
    let took = b.within_limit("a triage card to its model request", start, || {
        b.board.bills(&card) > 0
    });
    eprintln!("triage card -> model request: {took:?}");

    assert!(b.board.gateway_alive(), "{}", b.board.gateway_log());
    assert!(
        b.wakeups() >= 3,
        "the gateway counts the ticks wake-ups started: {}",
        b.wakeups()
    );
    assert!(b.board.ticks() > ticks_at_start);
}

/// A task scheduled two seconds ahead runs then, with a 30 s tick: the schedule wakes
/// the gateway, which ticks again at the task's time.
fn a_scheduled_task_runs_at_its_time_not_at_the_next_tick(postgres: bool) {
    let mut b = WakeBoard::new(postgres);
    b.board.start_gateway();
    let ticks = b.board.ticks();
    let later = b
        .board
        .create(&["later", "--assignee", "quick", "--initial-status", "blocked"]);
    // The tick the creation woke has come and gone: only the schedule can wake the next.
    b.within_limit("the creation's tick", Instant::now(), || b.board.ticks() > ticks);
    let later_arg = later.to_string();
    b.board.kanban_ok(&["schedule", &later_arg, "--in", "2s"]);
    let scheduled = Instant::now();
    let until = b.store.get(&later).unwrap().scheduled_until.expect("a time");
    b.within_limit(
        "the scheduled task spawned two seconds on",
        scheduled + Duration::from_secs(2),
        || b.spawned(&later),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(now >= until, "spawned before its time");
}

#[test]
fn sqlite_a_scheduled_task_runs_at_its_time() {
    a_scheduled_task_runs_at_its_time_not_at_the_next_tick(false);
}

#[test]
fn postgres_a_scheduled_task_runs_at_its_time() {
    a_scheduled_task_runs_at_its_time_not_at_the_next_tick(true);
}

#[test]
fn sqlite_writes_wake_the_gateway() {
    wakes_the_gateway(false);
}

#[test]
fn postgres_writes_wake_the_gateway() {
    wakes_the_gateway(true);
}

/// A worker that completes through its report channel and exits frees its slot at
/// once: with `max_spawn: 1` and a 30 s tick, the task waiting for the slot starts well
/// before the next tick. Both tasks exist before the gateway starts, so only the first
/// worker's exit can start the second.
fn a_finished_worker_frees_its_slot_at_once(postgres: bool) {
    let mut b = WakeBoard::with_slots(postgres, 1);
    let first = b
        .board
        .create(&["first", "--assignee", "quick", "--priority", "5"]);
    let second = b.board.create(&["second", "--assignee", "quick"]);
    b.board.start_gateway();
    b.within_limit("the first task done", Instant::now(), || {
        b.status(&first) == Status::Done
    });
    let done = Instant::now();
    let took = b.within_limit("first done to second spawned", done, || b.spawned(&second));
    eprintln!("first done -> second spawned: {took:?}");
    b.within_limit("the second task done", Instant::now(), || {
        b.status(&second) == Status::Done
    });
    assert!(b.board.gateway_alive(), "{}", b.board.gateway_log());
}

#[test]
fn sqlite_a_finished_worker_frees_its_slot_at_once() {
    a_finished_worker_frees_its_slot_at_once(false);
}

#[test]
fn postgres_a_finished_worker_frees_its_slot_at_once() {
    a_finished_worker_frees_its_slot_at_once(true);
}

/// A burst of wake-ups while the gateway ticks is one pending wake-up, not one tick
/// each: 500 datagrams sent at once start a handful of ticks (each 5 ms after the last
/// at the earliest), where one tick apiece would take over ten seconds.
#[test]
fn a_burst_of_wake_ups_starts_few_ticks() {
    let mut b = WakeBoard::new(false);
    b.board.start_gateway();
    let before = b.wakeups();
    let socket = std::os::unix::net::UnixDatagram::unbound().unwrap();
    let path = b.board.path().join("gateway.wake");
    let mut sent = 0;
    for _ in 0..500 {
        // A full queue already holds a pending wake-up; the sender never waits.
        if socket.send_to(&[], &path).is_ok() {
            sent += 1;
        }
    }
    assert!(sent > 0, "no datagram reached {}", path.display());
    let mut last = (b.wakeups(), Instant::now());
    crate::gateway_board::wait_until("the wake-ups to settle", Duration::from_secs(20), || {
        let now = b.wakeups();
        if now != last.0 {
            last = (now, Instant::now());
        }
        now > before && last.1.elapsed() > Duration::from_millis(500)
    });
    let started = b.wakeups() - before;
    assert!(
        started <= 25,
        "{sent} datagrams started {started} ticks; a burst should start a few"
    );
    assert!(b.board.gateway_alive(), "{}", b.board.gateway_log());
}

/// The listener's session terminated: the gateway says so once, goes on ticking,
/// listens again after its pause, and a write wakes it as before.
#[test]
fn postgres_listener_reconnects_after_losing_its_session() {
    let mut b = WakeBoard::new(true);
    b.board.start_gateway();
    let pid = b.board.gateway.as_ref().expect("started").id();
    let name = format!("kanban pid {pid} wake-ups");
    assert_eq!(terminate_sessions(&name), 1, "one listening session");
    let log = || b.board.gateway_log();
    b.within_limit("the lost session's warning", Instant::now(), || {
        log().contains("not listening for wake-ups")
    });
    // Reconnecting waits a second first, so a lost server never makes a busy loop.
    crate::gateway_board::wait_until("the listener to reconnect", Duration::from_secs(10), || {
        log().contains("listening for wake-ups again")
    });
    assert_eq!(
        log().matches("not listening for wake-ups").count(),
        1,
        "{}",
        log()
    );
    let start = Instant::now();
    let task = b.board.create(&["after the reconnect", "--assignee", "quick"]);
    b.within_limit("created ready to spawned after the reconnect", start, || {
        b.spawned(&task)
    });
    let alive = b.board.gateway_alive();
    assert!(alive, "{}", b.board.gateway_log());
}
