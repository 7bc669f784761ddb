//! Reliability (issue 7): crash consistency. The gateway is SIGKILLed at random points
//! while it decomposes cards, claims tasks, reaps workers and reclaims runs, and so are
//! CLI writers (creates, manual decompositions, completions, reclaims) mid-command.
//! After every kill the board, read from a read-only snapshot, satisfies every invariant
//! of SPEC 3.1 and holds no half-written decomposition, no event without its state
//! change and no task with two open runs; the restarted gateway carries on.
//!
//! 20 kills of each kind by default; `cargo xtask soak` sets `KANBAN_SOAK_KILLS=200`.

#[path = "gateway_board/check_board_mutations.rs"]
mod check_board_mutations;
mod gateway_board;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use board_core::{EventFilter, Status, Store};
use fake_llm::Reply;
use gateway_board::{check_board, worker_profile, Board, Setup};

fn kills() -> usize {
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

fn last_event_id(b: &Board) -> i64 {
    let Ok(db) = board_sqlite::SqliteStore::open_read_only(b.db_path()) else {
        return 0;
    };
    let filter = EventFilter {
        after_id: 0,
        ..EventFilter::default()
    };
    db.events(&filter).map_or(0, |e| e.last().map_or(0, |e| e.id))
}

fn check(b: &Board, when: &str) {
    let snapshot = b.snapshot();
    if let Err(broken) = check_board(&snapshot) {
        panic!("after {when}: {broken}\ngateway log:\n{}", b.gateway_log());
    }
}

#[test]
fn the_board_survives_sigkills_of_the_gateway_and_of_cli_writers() {
    let kills = kills();
    let mut rng = Rng::seeded();
    let profiles = [
        worker_profile("quick", "kanban heartbeat; kanban complete --result ok"),
        worker_profile(
            "slow",
            "sleep 0.3; kanban heartbeat; kanban complete --result slow",
        ),
        worker_profile("crasher", "exit 3"),
    ]
    .concat();
    let mut b = Board::new(Setup {
        profiles: &profiles,
        max_spawn: 6,
        kanban_extra: "  failure_limit: 2\n",
        ..Setup::default()
    });
    for i in 0..4 {
        b.reply(
            &format!("fan {i}"),
            Reply::delayed(Duration::from_millis(50 * i), Reply::text(FANOUT)),
        );
    }
    let started = Instant::now();
    let (mut gateway_kills, mut writer_kills) = (0, 0);
    for round in 0..kills {
        // New work every round: triage cards to decompose, ready tasks to run.
        b.create(&[&format!("fan {}", round % 4), "--triage"]);
        b.create(&[&format!("quick {round}"), "--assignee", "quick"]);
        b.create(&[&format!("slow {round}"), "--assignee", "slow"]);
        b.start_gateway();
        // Kill once the board has moved on by a random number of events (or after a
        // short while, when it has nothing left to do).
        let target = last_event_id(&b) + 1 + rng.below(25) as i64;
        let deadline = Instant::now() + Duration::from_millis(300 + rng.below(700));
        while last_event_id(&b) < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        b.kill_gateway();
        gateway_kills += 1;
        check(&b, &format!("gateway kill {round}"));

        // A CLI writer killed mid-command.
        let snapshot = b.snapshot();
        let pick = |status: Status| {
            snapshot
                .tasks
                .iter()
                .filter(|t| t.status == status)
                .map(|t| t.id.to_string())
                .next()
        };
        let args: Vec<String> = match rng.below(5) {
            0 => vec!["create".into(), format!("killed create {round}")],
            1 => match pick(Status::Triage) {
                Some(id) => vec!["decompose".into(), id],
                None => vec![
                    "create".into(),
                    format!("killed create {round}"),
                    "--triage".into(),
                ],
            },
            2 => match pick(Status::Running) {
                Some(id) => vec!["reclaim".into(), id],
                None => vec!["dispatch".into()],
            },
            3 => match pick(Status::Ready) {
                Some(id) => vec!["complete".into(), id, "--result".into(), "by hand".into()],
                None => vec!["dispatch".into()],
            },
            _ => match pick(Status::Todo) {
                Some(id) => vec!["create".into(), format!("child {round}"), "--parent".into(), id],
                None => vec!["dispatch".into()],
            },
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut writer: Child = b
            .command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.below(40_000)));
        let _ = writer.kill();
        let _ = writer.wait();
        writer_kills += 1;
        check(
            &b,
            &format!("killing `kanban {}` in round {round}", args.join(" ")),
        );
    }
    // A last gateway runs the board to rest: it must adopt or reclaim what was left.
    b.start_gateway();
    b.prove_ticks(2);
    b.kill_gateway();
    b.kill_workers();
    check(&b, "the final gateway");
    let snapshot = b.snapshot();
    let count = |s: Status| snapshot.tasks.iter().filter(|t| t.status == s).count();
    let decomposed = snapshot.events.iter().filter(|e| e.kind == "decomposed").count();
    eprintln!(
        "{gateway_kills} gateway kills, {writer_kills} writer kills in {:?}: {} tasks ({} done, {} running), {} runs, {decomposed} decompositions, {} events",
        started.elapsed(),
        snapshot.tasks.len(),
        count(Status::Done),
        count(Status::Running),
        snapshot.runs.len(),
        snapshot.events.len()
    );
    assert!(
        decomposed > 0 && count(Status::Done) > 0,
        "the board did real work"
    );
    assert!(!b.gateway_log().contains("panicked"), "{}", b.gateway_log());
}
